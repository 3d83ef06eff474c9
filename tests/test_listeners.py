"""``graphrag serve``'s two listeners (worker.http.listen), on real sockets, one server.

The public listener (``GRAPHRAG_PUBLIC_PORT``: what the proxy in front of Doughnut points at) serves
only Doughnut's two paths with Doughnut's credentials: the shared token reads as nobody there,
``?viewer=`` changes nothing, and ``/metrics``, ``/healthz``, the service's own paths and its API
description are not found. The internal listener serves all of them as before. Both close a
connection whose request head does not arrive within ``GRAPHRAG_HEADER_TIMEOUT_S``.
"""

from __future__ import annotations

import select
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from storage.database import open_engine
from storage.redis.client import build_client, delete_prefix
from tests.ports import free_port
from tests.proxy_support import wait_listening
from tests.reliability.support import graphrag
from worker.http.listen import Listeners, bound
from worker.http.server import build_http_app
from worker.settings import Settings

pytestmark = pytest.mark.redis

SHARED, USER_TOKEN = "listeners-shared-token", "listeners-user-token"
NOT_LOGGED_IN = b'{"message":"User Not Found","errorType":"BINDING_ERROR","errors":{}}'
REDIS_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True)
class Running:
    internal: str
    public: str
    note: int  # in a notebook outside the bazaar
    owner: int

    def get(self, base: str, path: str, token: str | None = None) -> httpx.Response:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        return httpx.get(base + path, headers=headers, trust_env=False, timeout=30)


def _sample(directory: Path) -> tuple[str, int, int]:
    url = f"sqlite:///{directory / 'doughnut.db'}"
    for step in (("db", "init"), ("db", "load-sample")):
        done = graphrag(*step, "--schema", "doughnut-2026", "--db", url)
        assert done.returncode == 0, done.stderr.decode()
    engine = open_engine(url)
    with engine.begin() as conn:
        note, owner = conn.execute(text(
            "SELECT n.id, o.user_id FROM note n JOIN notebook b ON b.id = n.notebook_id "
            "JOIN ownership o ON o.id = b.ownership_id WHERE o.user_id IS NOT NULL "
            "AND n.deleted_at IS NULL AND b.id NOT IN (SELECT notebook_id FROM bazaar_notebook) "
            "ORDER BY n.id LIMIT 1")).one()
        conn.execute(text("INSERT INTO user_token (user_id, token, label) VALUES (:u, :t, 'test')"),
                     {"u": owner, "t": USER_TOKEN})
    engine.dispose()
    return url, int(note), int(owner)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    url, note, owner = _sample(tmp_path_factory.mktemp("listeners"))
    prefix = f"graphrag-listeners:{uuid.uuid4().hex[:12]}:v1"
    internal, public = free_port(), free_port()
    settings = Settings(database_url=url, schema_name="doughnut-2026", reader_auth="both",
                        reader_token=SHARED, redis_url=REDIS_URL, redis_prefix=prefix,
                        public_port=public, header_timeout_s=1.0)
    server, sockets = bound(build_http_app(settings), Listeners("127.0.0.1", internal, None, public),
                            header_timeout_s=settings.header_timeout_s, log_level="warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, daemon=True)
    thread.start()
    try:
        for port in (internal, public):
            wait_listening(port, "graphrag serve", thread.is_alive)
        yield Running(f"http://127.0.0.1:{internal}", f"http://127.0.0.1:{public}", note, owner)
    finally:
        server.should_exit = True
        thread.join(15)
        delete_prefix(build_client(REDIS_URL, timeout_ms=2_000), prefix)


def test_the_public_listener_serves_doughnuts_paths_to_doughnuts_users_only(running: Running) -> None:
    path = f"/api/notes/{running.note}/graph?tokenLimit=500"
    as_user = running.get(running.public, path, USER_TOKEN)
    assert as_user.status_code == 200 and "X-Graphrag-Source" in as_user.headers
    for token in (SHARED, None):
        refused = running.get(running.public, path, token)
        assert (refused.status_code, refused.content) == (401, NOT_LOGGED_IN), token
    viewer = running.get(running.public, f"{path}&viewer={running.owner}", SHARED)
    assert (viewer.status_code, viewer.content) == (401, NOT_LOGGED_IN)
    for other in ("/metrics", "/healthz", f"/notes/{running.note}/graph", "/openapi.json", "/docs"):
        assert running.get(running.public, other, SHARED).status_code == 404, other


def test_the_internal_listener_serves_everything_as_before(running: Running) -> None:
    path = f"/api/notes/{running.note}/graph?tokenLimit=500"
    assert running.get(running.internal, "/metrics").status_code == 200
    assert running.get(running.internal, "/healthz").status_code == 200
    shared = running.get(running.internal, path, SHARED)
    assert shared.status_code == 200
    assert shared.content == running.get(running.public, path, USER_TOKEN).content
    viewer = running.get(running.internal, f"{path}&viewer={running.owner}", SHARED)
    assert viewer.status_code == 200
    assert running.get(running.internal, f"/notes/{running.note}/graph", SHARED).status_code == 200
    assert running.get(running.internal, f"/notes/{running.note}/graph").status_code == 401


@pytest.mark.parametrize("listener", ["internal", "public"])
def test_a_request_head_that_never_ends_is_cut_off(running: Running, listener: str) -> None:
    port = int(getattr(running, listener).rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        closed = False
        for _ in range(60):  # a header line every half second, 30 s in all: far past the deadline
            time.sleep(0.5)
            try:
                slow.sendall(b"X-Slow: 1\r\n")
            except OSError:  # reset by the peer
                closed = True
                break
            if select.select([slow], [], [], 0)[0]:
                closed = slow.recv(1) == b""
                assert closed, "the server answered a request whose head never ended"
                break
        assert closed, "the server kept a connection whose head never ended"
