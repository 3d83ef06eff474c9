"""The hot read (worker.http.hot) answers a fresh hit exactly as the route does, and nothing else.

Each request is sent twice to the same app over the same snapshots: once as it comes (a fresh hit
answered by the hot read) and once with the hot read finding nothing (the route answers); status,
headers (all but ``date``) and body must be the same. A read that is no fresh hit reaches the route.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.reader import SnapshotReader
from tests.test_http import Service, running

REQUESTS = [
    ("/notes/10/graph", {}, {}),
    ("/notes/10/graph", {"seed": "3", "tokenLimit": "300"}, {}),
    ("/notes/10/graph", {"strategy": "layered", "tokenLimit": "400", "seed": "0"}, {}),
    ("/notes/10/graph", {"strategy": "relationship-bfs"}, {}),
    ("/notes/10/graph", {"tokenLimit": "1", "tokenLimit ": "x", "seed": "0"}, {}),
    ("/api/notes/10/graph", {"tokenLimit": "700"}, {}),
    ("/api/notes/10/graph", {}, {}),
]


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    with running(tmp_path) as service:
        service.rebuild(10, 11)
        yield service


def _seen(response: httpx.Response) -> tuple[int, dict[str, str], bytes]:
    headers = {k: v for k, v in response.headers.items() if k != "date"}
    return response.status_code, headers, response.content


def _routed(svc: Service, monkeypatch: pytest.MonkeyPatch, path: str, params: dict[str, str],
            headers: dict[str, str]) -> httpx.Response:
    with monkeypatch.context() as patched:
        patched.setattr(SnapshotReader, "cached", lambda *_a, **_k: None)
        return svc.http.get(path, params, headers=headers)


@pytest.mark.parametrize(("path", "params", "headers"), REQUESTS)
def test_a_hit_is_answered_as_the_route_answers_it(
        svc: Service, monkeypatch: pytest.MonkeyPatch, path: str, params: dict[str, str],
        headers: dict[str, str]) -> None:
    routed = _routed(svc, monkeypatch, path, params, headers)
    gets: list[int] = []
    real_get = SnapshotReader.get
    monkeypatch.setattr(SnapshotReader, "get",
                        lambda self, *a, **k: gets.append(1) or real_get(self, *a, **k))
    hot = svc.http.get(path, params, headers=headers)
    assert _seen(hot) == _seen(routed)
    assert hot.headers["X-Graphrag-Source"] == "cache"
    assert gets == []  # answered without the route's read
    tag = hot.headers["ETag"]
    again = svc.http.get(path, params, headers={**headers, "If-None-Match": tag})
    assert _seen(again) == _seen(_routed(svc, monkeypatch, path, params,
                                         {**headers, "If-None-Match": tag}))
    assert again.status_code == 304


@pytest.mark.parametrize(("path", "params", "status", "reads"), [
    ("/notes/12/graph", {}, 200, 1),  # no snapshot yet: a miss, computed live
    ("/notes/10/graph", {"tokenLimit": "x"}, 400, 0),  # refused by the route's parsing
    ("/notes/10/graph", {"seed": "99"}, 400, 1),  # an unknown seed
    ("/notes/99999/graph", {}, 404, 1),  # no such note
    ("/notes/10/context.md", {}, 200, 1),  # another path
])
def test_anything_but_a_fresh_hit_reaches_the_route(
        svc: Service, monkeypatch: pytest.MonkeyPatch, path: str, params: dict[str, str],
        status: int, reads: int) -> None:
    gets: list[int] = []
    real_get = SnapshotReader.get
    monkeypatch.setattr(SnapshotReader, "get",
                        lambda self, *a, **k: gets.append(1) or real_get(self, *a, **k))
    response = svc.http.get(path, params)
    assert response.status_code == status, response.text
    assert len(gets) == reads  # the route answered it (its own read, or its parsing refused it)


def test_a_refused_token_never_reaches_the_hot_read(svc: Service) -> None:
    response = svc.http.get("/notes/10/graph", auth=False,
                            headers={"Authorization": "Bearer wrong"})
    assert response.status_code == 401
