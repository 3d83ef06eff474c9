"""The pieces of tests/test_proxy.py: Debian's nginx running the shipped ``ops/nginx/graphrag.conf``,
a stub standing in for Doughnut's backend, and this service's app under uvicorn, all on loopback."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
import uvicorn

from tests.ports import free_port

NGINX = "/usr/sbin/nginx"
CONF = Path(__file__).resolve().parents[1] / "ops" / "nginx" / "graphrag.conf"
#: what Doughnut's ``POST /api/notes/search`` answers (``RelationshipLiteralSearchHit``s): the fields
#: Doughnut's MCP server reads (``hitKind``, ``noteSearchResult``) are there, so that server finds it
SEARCH_ANSWER = [{"hitKind": "NOTE", "noteSearchResult": {
    "noteTopology": {"id": 2, "title": "B"}, "notebookId": 1, "notebookName": "Books",
    "distance": 0.1}, "notebookId": 1, "notebookName": "Books", "distance": 0.1}]
#: Doughnut's answer to whose web session a request carries
SESSION_PATH = "/api/user/current-user-info"


def wait_listening(port: int, what: str, alive: Any = lambda: True, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert alive(), f"{what} exited during start-up"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not listen on 127.0.0.1:{port} within {seconds} s")


# -- Doughnut's backend ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Seen:
    method: str
    path: str  # with the query string, as received
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass
class Stub:
    """Doughnut's backend: ``sessions`` maps a ``Cookie`` header to the user id of its session
    (None: a principal with no user); ``sessions_down`` makes its user endpoint fail."""

    port: int
    received: list[Seen] = field(default_factory=list)
    sessions: dict[str, int | None] = field(default_factory=dict)
    sessions_down: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def session_answer(self, cookie: str | None) -> tuple[int, bytes]:
        if self.sessions_down:
            return 500, b'{"error":"Internal Server Error"}'
        user = self.sessions.get(cookie or "")
        who = None if user is None else {"id": user, "name": f"user {user}"}
        return 200, orjson.dumps({"user": who, "externalIdentifier": who and f"ext-{user}"})


class _Handler(BaseHTTPRequestHandler):
    stub: Stub

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.stub.received.append(Seen(self.command, self.path,
                                       {k.lower(): v for k, v in self.headers.items()}, body))
        status = 200
        if (self.command, self.path) == ("POST", "/api/notes/search"):
            content = orjson.dumps(SEARCH_ANSWER)
        elif (self.command, self.path) == ("GET", SESSION_PATH):
            status, content = self.stub.session_answer(self.headers.get("Cookie"))
        else:
            content = orjson.dumps({"served_by": "doughnut-stub", "method": self.command,
                                    "path": self.path})
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(content)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@contextlib.contextmanager
def doughnut_stub() -> Iterator[Stub]:
    stub = Stub(free_port())
    handler = type("Handler", (_Handler,), {"stub": stub})
    server = ThreadingHTTPServer(("127.0.0.1", stub.port), handler)
    thread = threading.Thread(target=server.serve_forever, name="doughnut-stub", daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


# -- this service ----------------------------------------------------------------------------------
@contextlib.contextmanager
def serve(app: Any, port: int) -> Iterator[uvicorn.Server]:
    """``app`` under uvicorn on ``port`` in a thread, until the block ends (or ``should_exit``)."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    try:
        wait_listening(port, "uvicorn", thread.is_alive)
        yield server
    finally:
        server.should_exit = True
        thread.join(15)
        assert not thread.is_alive(), "uvicorn did not stop"


# -- nginx -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Proxy:
    port: int
    directory: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def error_log(self) -> str:
        path = self.directory / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _wrapper(shipped: Path, doughnut: int, graphrag: int) -> str:
    temp = "".join(f"    {kind}_temp_path temp/{kind};\n"
                   for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"worker_processes 1;\nevents {{}}\nhttp {{\n{temp}"
            f"    access_log access.log;\n"
            f"    upstream doughnut {{ server 127.0.0.1:{doughnut}; }}\n"
            f"    upstream graphrag {{ server 127.0.0.1:{graphrag}; }}\n"
            f"    include {shipped};\n}}\n")


@contextlib.contextmanager
def nginx(doughnut: int, graphrag: int) -> Iterator[Proxy]:
    """Debian's nginx, unprivileged, in a private prefix, serving the shipped graphrag.conf (its
    ``listen`` set to a free loopback port) in front of the two upstreams."""
    if not os.access(NGINX, os.X_OK):
        pytest.fail(f"{NGINX} is missing: install Debian's nginx-light "
                    "(apt-get install --no-install-recommends nginx-light; .ci/run does)")
    port = free_port()
    shipped, count = re.subn(r"(?m)^(\s*)listen\s+80;", rf"\g<1>listen 127.0.0.1:{port};",
                             CONF.read_text())
    assert count == 1, f"{CONF} should have exactly one `listen 80;`"
    directory = Path(tempfile.mkdtemp(prefix="graphrag-nginx-"))
    (directory / "temp").mkdir()
    (directory / "graphrag.conf").write_text(shipped)
    (directory / "nginx.conf").write_text(_wrapper(directory / "graphrag.conf", doughnut, graphrag))
    run_as: dict[str, Any] = {}
    if os.geteuid() == 0:  # never as root: the whole of nginx as nobody
        nobody = pwd.getpwnam("nobody")
        run_as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        for path in (directory, *directory.rglob("*")):
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
    proc = subprocess.Popen(
        [NGINX, "-p", f"{directory}/", "-c", "nginx.conf", "-e", "error.log",
         "-g", f"daemon off; pid {directory}/nginx.pid;"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **run_as)
    proxy = Proxy(port, directory)
    try:
        try:
            wait_listening(port, "nginx", lambda: proc.poll() is None)
        except AssertionError as failed:
            stderr = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""
            raise AssertionError(f"{failed}\n{stderr}{proxy.error_log()}") from None
        yield proxy
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stderr:
            proc.stderr.close()
        shutil.rmtree(directory, ignore_errors=True)
