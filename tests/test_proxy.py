"""The shipped reverse-proxy configuration (ops/nginx/graphrag.conf) before Doughnut and this service.

Debian's nginx runs that file unprivileged on loopback, with a stub for Doughnut's backend and this
service's app (tests/doughnut_users.py: MariaDB 2026 users and tokens, snapshots in the real Redis)
under uvicorn. Doughnut's two context paths, with a user's token, reach the service and answer as
that user, byte for byte; everything else (other paths, other methods) reaches Doughnut unchanged;
and with the service stopped or failing, Doughnut answers the context paths too.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from graphrag.core.errors import DatabaseUnavailable
from graphrag.wiki.model import Viewer
from tests.doughnut_users import TOKEN_TTL_MS, Site, site
from tests.ports import free_port
from tests.proxy_support import CONF, SEARCH_ANSWER, Proxy, Stub, doughnut_stub, nginx, serve
from worker.http.doughnut_paths import PATHS

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

NOT_LOGGED_IN = b'{"message":"User Not Found","errorType":"BINDING_ERROR","errors":{}}'


@dataclass
class Stack:
    users: Site
    stub: Stub
    proxy: Proxy
    service_port: int

    def request(self, method: str, path: str, token: str | None = None, *, direct: bool = False,
                headers: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
        base = f"http://127.0.0.1:{self.service_port}" if direct else self.proxy.url
        headers = dict(headers or {}) | ({} if token is None else {"Authorization": f"Bearer {token}"})
        with httpx.Client(base_url=base, trust_env=False, timeout=30) as client:
            return client.request(method, path, headers=headers, **kwargs)

    def stub_paths(self) -> list[tuple[str, str]]:
        return [(seen.method, seen.path) for seen in self.stub.received]


@pytest.fixture(scope="module")
def users() -> Iterator[Site]:
    with site() as s:
        yield s


@contextlib.contextmanager
def stacked(users: Site) -> Iterator[Stack]:
    """The stub of Doughnut and nginx in front of it and of the service's port (not yet served)."""
    users.now_ms[0] += 10 * TOKEN_TTL_MS  # nothing remembered from an earlier test
    port = free_port()
    with doughnut_stub() as stub, nginx(stub.port, port) as proxy:
        try:
            yield Stack(users, stub, proxy, port)
        finally:
            print(f"--- nginx error.log ---\n{proxy.error_log()}")  # shown when a test fails


@pytest.fixture
def stack(users: Site) -> Iterator[Stack]:
    with stacked(users) as running:
        yield running


def context(users: Site, note: str, path: str = "graph", limit: int = 2000) -> str:
    return f"/api/notes/{users.notes[note]}/{path}?tokenLimit={limit}"


def test_the_shipped_conf_routes_exactly_the_services_paths() -> None:
    assert re.findall(r"location ~ (\S+) \{", CONF.read_text()) == [f"^{PATHS}$"]


def test_context_paths_reach_the_service_and_answer_as_the_user(users: Site, stack: Stack) -> None:
    with serve(users.client("doughnut").app, stack.service_port):
        for note, token, user, markdown in (
                ("A", "tok-owner", 1, False), ("F", "tok-subscriber", 2, False),
                ("C", "tok-member4", 4, False), ("A", "tok-owner", 1, True)):
            path = context(users, note, "ai-context-markdown" if markdown else "graph")
            proxied = stack.request("GET", path, token)
            direct = stack.request("GET", path, token, direct=True)
            assert proxied.status_code == direct.status_code == 200
            assert proxied.content == direct.content == users.live(
                note, viewer=Viewer(user_id=user), markdown=markdown)
            assert proxied.headers["X-Graphrag-Source"] == direct.headers["X-Graphrag-Source"]
            kept = stack.request("GET", path, token,
                                 headers={"If-None-Match": proxied.headers["ETag"]})
            assert (kept.status_code, kept.content) == (304, b"")  # the main app's revalidation
        # refusals are the service's too, with Doughnut's bodies
        refused = stack.request("GET", context(users, "A"))
        assert (refused.status_code, refused.content) == (401, NOT_LOGGED_IN)
        stranger = stack.request("GET", context(users, "A"), "tok-stranger")
        assert stranger.status_code == 403
        assert orjson.loads(stranger.content)["path"] == f"/api/notes/{users.notes['A']}/graph"
        bad = stack.request("GET", f"/api/notes/{users.notes['A']}/graph?tokenLimit=abc", "tok-owner")
        assert bad.status_code == 400 and b"Failed to convert 'tokenLimit'" in bad.content
        # HEAD: the service's status and length, no body
        head = stack.request("HEAD", context(users, "A"), "tok-owner")
        owner_a = users.live("A", viewer=Viewer(user_id=1))
        assert (head.status_code, head.content) == (200, b"")
        assert head.headers["Content-Length"] == str(len(owner_a))
        assert "X-Graphrag-Source" in head.headers
    assert stack.stub.received == []  # Doughnut saw none of them


def test_everything_else_reaches_doughnut_unchanged(users: Site, stack: Stack) -> None:
    query = b'{"searchKey":"about A","allMyNotebooksAndSubscriptions":true}'
    note = users.notes["A"]
    with serve(users.client("doughnut").app, stack.service_port):
        search = stack.request("POST", "/api/notes/search", "tok-owner", content=query,
                               headers={"Content-Type": "application/json"})
        assert (search.status_code, orjson.loads(search.content)) == (200, SEARCH_ANSWER)
        assert "X-Graphrag-Source" not in search.headers
        seen = stack.stub.received[0]
        assert (seen.method, seen.path, seen.body) == ("POST", "/api/notes/search", query)
        assert seen.headers["authorization"] == "Bearer tok-owner"
        assert seen.headers["content-type"] == "application/json"
        assert seen.headers["host"] == f"127.0.0.1:{stack.proxy.port}"
        assert seen.headers["x-forwarded-for"] == "127.0.0.1"
        assert seen.headers["x-forwarded-proto"] == "http"
        others = [("GET", f"/api/notes/{note}"), ("GET", "/api/user"),
                  ("GET", f"/api/notes/{note}/graph/more?tokenLimit=9"),
                  ("GET", f"/api/notes/{note}/graphs?tokenLimit=9"),
                  ("GET", f"/api/x/api/notes/{note}/graph?tokenLimit=9"),
                  ("POST", context(users, "A")),  # only GET and HEAD are the service's
                  ("PUT", context(users, "A", "ai-context-markdown")),
                  ("PATCH", f"/api/notes/{note}?a=1&b=%20x")]
        for method, path in others:
            body = b'{"x": 1}' if method != "GET" else b""
            answer = stack.request(method, path, "tok-subscriber", content=body)
            assert answer.status_code == 200, (method, path)
            assert orjson.loads(answer.content) == {"served_by": "doughnut-stub", "method": method,
                                                    "path": path}
            last = stack.stub.received[-1]
            assert (last.method, last.path, last.body) == (method, path, body)
            assert last.headers["authorization"] == "Bearer tok-subscriber"
    assert len(stack.stub.received) == 1 + len(others)


def test_doughnut_answers_the_context_paths_when_the_service_is_down(
        users: Site, stack: Stack) -> None:
    path = context(users, "A")
    with serve(users.client("doughnut").app, stack.service_port):
        assert "X-Graphrag-Source" in stack.request("GET", path, "tok-owner").headers
    # stopped: nothing listens on the service's port
    for method, token in (("GET", "tok-owner"), ("GET", None), ("HEAD", "tok-owner")):
        answer = stack.request(method, path, token)
        assert answer.status_code == 200 and "X-Graphrag-Source" not in answer.headers
        last = stack.stub.received[-1]
        assert (last.method, last.path) == (method, path)
        assert last.headers.get("authorization") == (token and f"Bearer {token}")
    markdown = context(users, "A", "ai-context-markdown", 77)
    assert orjson.loads(stack.request("GET", markdown, "tok-owner").content)["path"] == markdown
    search = stack.request("POST", "/api/notes/search", "tok-owner", content=b"{}")
    assert orjson.loads(search.content) == SEARCH_ANSWER
    assert stack.request("GET", "/api/user", "tok-owner").status_code == 200
    assert stack.stub_paths()[-3:] == [("GET", markdown), ("POST", "/api/notes/search"),
                                       ("GET", "/api/user")]

    # running but answering 503 (its database unreachable): Doughnut answers that request
    def down(_token: str) -> None:
        raise DatabaseUnavailable("database unreachable: connection refused")

    failing = users.client("doughnut", lookup=down).app
    with serve(failing, stack.service_port):
        assert stack.request("GET", path, "tok-owner", direct=True).status_code == 503
        before = len(stack.stub.received)
        answer = stack.request("GET", path, "tok-owner")
        assert answer.status_code == 200 and orjson.loads(answer.content)["served_by"] == "doughnut-stub"
        assert stack.stub_paths()[before:] == [("GET", path)]
        # the service's own answers other than 502/503/504 still pass (a note anyone may read)
        bazaar = stack.request("GET", context(users, "Z"))
        assert bazaar.content == users.live("Z", viewer=Viewer())
        assert len(stack.stub.received) == before + 1
