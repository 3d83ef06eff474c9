"""``graphrag_http_responses_total{route, code}`` (worker.http.metrics): every answer of the HTTP app
is counted by its route's template and status, refusals of the bearer gate included, and a path no
route matches is one ``unmatched`` label, whatever the path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from service.metrics import http_responses
from tests.redis.readers import Clock, sqlite_service
from tests.test_http import AUTH, READ_AT_MS, fake_store, make_app
from worker.http.metrics import count_responses


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[TestClient, CollectorRegistry]]:
    with sqlite_service(tmp_path) as service:
        registry = CollectorRegistry()
        client = make_app(service, fake_store(), Clock(READ_AT_MS), registry)
        count_responses(client.app, http_responses(registry))  # type: ignore[arg-type]
        with client:
            yield client, registry


def responses(registry: CollectorRegistry, route: str, code: int) -> float:
    labels = {"route": route, "code": str(code)}
    return registry.get_sample_value("graphrag_http_responses_total", labels) or 0.0


def test_answers_are_counted_by_route_template_and_code(
        counted: tuple[TestClient, CollectorRegistry]) -> None:
    client, registry = counted
    for note in (1, 2, 3):
        assert client.get(f"/notes/{note}/graph", headers=AUTH).status_code == 200
    assert client.get("/notes/1/graph").status_code == 401  # refused by the bearer gate
    assert client.get("/api/notes/1/graph?tokenLimit=x", headers=AUTH).status_code == 400
    assert client.get("/healthz").status_code == 200
    assert responses(registry, "/notes/{note_id}/graph", 200) == 3
    assert responses(registry, "/notes/{note_id}/graph", 401) == 1
    assert responses(registry, "/api/notes/{note_id}/graph", 400) == 1
    assert responses(registry, "/healthz", 200) == 1


def test_paths_no_route_matches_share_one_label(
        counted: tuple[TestClient, CollectorRegistry]) -> None:
    client, registry = counted
    for path in ("/nowhere", "/x/y/z", "/notes"):
        client.get(path, headers=AUTH)
    routes = {s.labels["route"] for metric in registry.collect() for s in metric.samples
              if metric.name == "graphrag_http_responses"}
    assert "unmatched" in routes
    assert not routes & {"/nowhere", "/x/y/z", "/notes"}
