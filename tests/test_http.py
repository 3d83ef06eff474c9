"""The HTTP surface (docs/architecture.md) over a SnapshotReader on fakeredis (with Lua) and SQLite.

Every response goes through :meth:`Http.get`, which also checks that no body carries a traceback.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fakeredis
import httpx
import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from graphrag import Request
from service.context import ContextService
from service.decoding import decode_envelope
from service.metrics import ReaderMetrics
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import rebuild
from storage.redis.cache import RedisCache as SnapshotStore
from storage.redis.coordination import RedisCoordination
from tests.redis.readers import (
    DELETED_LINK,
    DELETED_NOTE,
    TOKEN,
    UNKNOWN_NOTE,
    Clock,
    down_service,
    snapshot_of,
    sqlite_service,
)
from tests.support import NOW_MS
from worker.http.app import create_app
from worker.http.server import health_of

SOFT_TTL_S, HARD_TTL_S = 3_600, 7_200
MAX_LIMIT = 1_000
LAYERED_LIMITS = (400, 1_000)
SEEDS = (0, 3)
STRATEGIES = ("wavefront", "relationship-bfs", "layered")
AUTH = {"Authorization": f"Bearer {TOKEN}"}
READ_AT_MS = NOW_MS + 5_400  # 5.4 s after the rebuild: X-Graphrag-Age 5


class FirstSeed(random.Random):
    """``seed=None`` always picks the first configured seed (so both paths are comparable)."""

    def choice(self, seq: Any) -> Any:
        return seq[0]


class Http:
    """A TestClient that never raises server errors and checks every body for tracebacks."""

    def __init__(self, client: TestClient) -> None:
        self.client = client

    def get(self, path: str, params: Mapping[str, str] | None = None, *, auth: bool = True,
            headers: Mapping[str, str | bytes] | None = None, **query: str) -> httpx.Response:
        sent = {**(AUTH if auth else {}), **(headers or {})}
        response: httpx.Response = self.client.get(path, params={**(params or {}), **query} or None,
                                                    headers=sent)
        assert "Traceback" not in response.text
        assert 'File "' not in response.text
        return response


@dataclass
class Service:
    http: Http
    service: ContextService
    store: SnapshotStore
    clock: Clock
    registry: CollectorRegistry

    def rebuild(self, *foci: int, now_ms: int = NOW_MS) -> None:
        report = rebuild(self.service, self.store, foci, strategies=STRATEGIES, seeds=SEEDS,
                         max_token_limit=MAX_LIMIT, layered_limits=LAYERED_LIMITS, now_ms=now_ms)
        assert report.errors == {} and report.count > 0

    def live(self, focus: int, *, seed: int = 0, limit: int = MAX_LIMIT, now_ms: int = READ_AT_MS,
             strategy: str = "wavefront") -> bytes:
        request = Request(focus, seed, limit, now_ms, max(limit, MAX_LIMIT))
        return self.service.compute(request, strategy).to_json()

    def stored(self, focus: int, seed: int = 0) -> bytes:
        env = snapshot_of(self.store, focus, "wavefront", seed)
        assert env is not None
        return orjson.dumps(env.result)

    def metric(self, name: str) -> float:
        return self.registry.get_sample_value(f"graphrag_{name}_total") or 0.0


def make_app(service: ContextService, store: SnapshotStore, clock: Clock,
             registry: CollectorRegistry) -> TestClient:
    config = ReaderConfig(strategies=STRATEGIES, seeds=SEEDS, max_token_limit=MAX_LIMIT,
                          layered_limits=LAYERED_LIMITS)
    reader = SnapshotReader(service, store, RedisCoordination(store.redis, store.keys), config,
                            metrics=ReaderMetrics.create(registry), clock_ms=clock, rng=FirstSeed())
    app = create_app(reader, reader_token=TOKEN, registry=registry,
                     health=health_of(store, service.store))
    return TestClient(app, raise_server_exceptions=False)


def fake_store(*, connected: bool = True) -> SnapshotStore:
    server = fakeredis.FakeServer()
    server.connected = connected
    return SnapshotStore(fakeredis.FakeRedis(server=server), soft_ttl_s=SOFT_TTL_S,
                         hard_ttl_s=HARD_TTL_S)


@contextmanager
def running(directory: Path) -> Iterator[Service]:
    """The app over a fresh SQLite file in ``directory`` and an empty fakeredis."""
    with sqlite_service(directory) as service:
        store, clock, registry = fake_store(), Clock(READ_AT_MS), CollectorRegistry()
        with make_app(service, store, clock, registry) as client:
            yield Service(Http(client), service, store, clock, registry)


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    with running(tmp_path) as service:
        yield service


def assert_error(response: httpx.Response, status: int, **fields: Any) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]
    for key, value in fields.items():
        assert body.get(key) == value, body
    return body


# -- 200s -----------------------------------------------------------------------------------------
def test_a_fresh_snapshot_is_served_exactly_with_source_and_age(svc: Service) -> None:
    svc.rebuild(10)
    response = svc.http.get("/notes/10/graph", seed="0")
    assert response.status_code == 200
    assert response.content == svc.stored(10) == svc.live(10, now_ms=NOW_MS)
    assert response.headers["content-type"] == "application/json"
    assert response.headers["X-Graphrag-Source"] == "cache"
    assert response.headers["X-Graphrag-Age"] == "5"
    small = svc.http.get("/notes/10/graph", tokenLimit="300", seed="3")
    assert small.content == svc.live(10, seed=3, limit=300, now_ms=NOW_MS)
    assert small.headers["X-Graphrag-Source"] == "cache"


def test_a_stale_snapshot_is_served_with_its_age(svc: Service) -> None:
    svc.rebuild(10)
    svc.clock.now_ms = NOW_MS + SOFT_TTL_S * 1000 + 7_900
    response = svc.http.get("/notes/10/graph", seed="0")
    assert response.status_code == 200
    assert response.content == svc.stored(10)
    assert response.headers["X-Graphrag-Source"] == "stale"
    assert response.headers["X-Graphrag-Age"] == str(SOFT_TTL_S + 7)


def test_a_miss_is_computed_live_then_cached(svc: Service) -> None:
    first = svc.http.get("/notes/21/graph", tokenLimit="300", seed="3")
    assert first.status_code == 200
    assert (first.headers["X-Graphrag-Source"], first.headers["X-Graphrag-Age"]) == ("live", "0")
    assert first.content == svc.live(21, seed=3, limit=300)
    second = svc.http.get("/notes/21/graph", tokenLimit="300", seed="3")
    assert second.headers["X-Graphrag-Source"] == "cache"
    assert second.content == first.content
    layered = svc.http.get("/notes/21/graph", tokenLimit="700", strategy="layered")
    assert layered.headers["X-Graphrag-Source"] == "live"
    assert layered.content == svc.live(21, limit=700, strategy="layered")
    above = svc.http.get("/notes/21/graph", tokenLimit=str(3 * MAX_LIMIT))
    assert above.headers["X-Graphrag-Source"] == "live"
    assert above.content == svc.live(21, limit=3 * MAX_LIMIT)


@pytest.mark.parametrize("limit", [None, "1", "300", "650", str(MAX_LIMIT), str(2 * MAX_LIMIT)])
def test_doughnuts_path_gives_the_same_bytes(svc: Service, limit: str | None) -> None:
    svc.rebuild(10, 12)
    for note in (10, 12, 21):
        params = {} if limit is None else {"tokenLimit": limit}
        ours = svc.http.get(f"/notes/{note}/graph", params)
        doughnut = svc.http.get(f"/api/notes/{note}/graph", params)
        assert ours.status_code == doughnut.status_code == 200
        assert doughnut.content == ours.content
        assert doughnut.headers["X-Graphrag-Source"] in ("cache", "live")
        asked = int(limit or MAX_LIMIT)
        from_rebuild = note != 21 and asked <= MAX_LIMIT  # 21 was cold: computed at READ_AT_MS
        assert doughnut.content == svc.live(note, limit=asked,
                                            now_ms=NOW_MS if from_rebuild else READ_AT_MS)


# -- 401 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/notes/10/graph", "/api/notes/10/graph", "/notes/abc/graph"])
@pytest.mark.parametrize("authorization", [
    None, f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer", "Bearer ", TOKEN, f"Basic {TOKEN}",
    f"Bearer  {TOKEN}", f"bearer{TOKEN}", "Bearer ünïcödé".encode(), f"Bearer {TOKEN}é".encode(),
])
def test_a_missing_or_wrong_bearer_token_is_401(
    svc: Service, path: str, authorization: str | bytes | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = svc.http.get(path, auth=False, headers=headers)
    assert_error(response, 401)
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert b"focusNote" not in response.content


# -- 400 ------------------------------------------------------------------------------------------
BAD = [
    ("abc", {}, "noteId"),
    ("-1", {}, "noteId"),
    ("1.5", {}, "noteId"),
    ("1e3", {}, "noteId"),
    ("0x10", {}, "noteId"),
    ("99999999999999999999", {}, "noteId"),
    ("10", {"tokenLimit": "0"}, "tokenLimit"),
    ("10", {"tokenLimit": "-3"}, "tokenLimit"),
    ("10", {"tokenLimit": "abc"}, "tokenLimit"),
    ("10", {"tokenLimit": "2.5"}, "tokenLimit"),
    ("10", {"tokenLimit": ""}, "tokenLimit"),
    ("10", {"tokenLimit": "99999999999999999999"}, "tokenLimit"),
    ("10", {"tokenLimit": "1000000001"}, "tokenLimit"),
    ("10", {"strategy": "nope"}, "strategy"),
    ("10", {"strategy": ""}, "strategy"),
    ("10", {"seed": "7"}, "seed"),
    ("10", {"seed": "-1"}, "seed"),
    ("10", {"seed": "x"}, "seed"),
    ("10", {"seed": "99999999999999999999"}, "seed"),
]


@pytest.mark.parametrize(("note", "params", "parameter"), BAD)
def test_bad_parameters_are_400_naming_the_parameter(
    svc: Service, note: str, params: dict[str, str], parameter: str
) -> None:
    svc.rebuild(10)
    assert_error(svc.http.get(f"/notes/{note}/graph", params), 400, parameter=parameter)
    if "seed" not in params and "strategy" not in params:
        assert_error(svc.http.get(f"/api/notes/{note}/graph", params), 400, parameter=parameter)


@pytest.mark.parametrize(("note", "params", "parameter"), [
    ("²", {}, "noteId"), ("10", {"tokenLimit": "³"}, "tokenLimit"), ("10", {"seed": "①"}, "seed"),
])
def test_digit_like_characters_are_400(
    svc: Service, note: str, params: dict[str, str], parameter: str
) -> None:
    assert_error(svc.http.get(f"/notes/{note}/graph", params), 400, parameter=parameter)


# -- 404 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("note", [UNKNOWN_NOTE, DELETED_NOTE, DELETED_LINK, 0])
def test_unknown_and_deleted_notes_are_404(svc: Service, note: int) -> None:
    for path in (f"/notes/{note}/graph", f"/api/notes/{note}/graph"):
        response = svc.http.get(path)
        body = assert_error(response, 404)
        assert str(note) in body["error"]
    assert not list(svc.store.redis.scan_iter(match=f"{svc.store.keys.prefix}:snap:*"))


# -- corrupt snapshots ----------------------------------------------------------------------------
@pytest.mark.parametrize("poison", ["bytes", "schema", "hash", "list"])
def test_corrupt_snapshot_bytes_are_a_miss_and_get_overwritten(svc: Service, poison: str) -> None:
    key = svc.store.keys.snapshot(10, "wavefront", 0)
    redis = svc.store.redis
    if poison == "bytes":
        redis.set(key, b"\xff\xfe garbage {")
    elif poison == "schema":
        redis.set(key, orjson.dumps({"schema": 99, "noteId": 10, "result": {"focusNote": {}}}))
    elif poison == "hash":
        redis.hset(key, "schema", "1")
    else:
        redis.rpush(key, b"x")
    response = svc.http.get("/notes/10/graph", seed="0")
    assert response.status_code == 200
    assert response.headers["X-Graphrag-Source"] == "live"
    assert response.content == svc.live(10)
    assert decode_envelope(redis.get(key)) is not None
    again = svc.http.get("/notes/10/graph", seed="0")
    assert (again.status_code, again.headers["X-Graphrag-Source"]) == (200, "cache")
    assert again.content == response.content


# -- outages --------------------------------------------------------------------------------------
def test_database_down_serves_snapshots_and_a_miss_is_503(tmp_path: Path) -> None:
    with sqlite_service(tmp_path) as good, down_service() as down:
        store, clock, registry = fake_store(), Clock(NOW_MS + HARD_TTL_S * 1000), CollectorRegistry()
        rebuild(good, store, [10], strategies=STRATEGIES, seeds=SEEDS, max_token_limit=MAX_LIMIT,
                layered_limits=LAYERED_LIMITS, now_ms=NOW_MS)
        with make_app(down, store, clock, registry) as client:
            http = Http(client)
            served = http.get("/notes/10/graph", seed="0")
            assert served.status_code == 200
            assert served.headers["X-Graphrag-Source"] == "stale"
            env = snapshot_of(store, 10, "wavefront", 0)
            assert env is not None and served.content == orjson.dumps(env.result)
            assert_error(http.get("/notes/21/graph"), 503)
            health = http.get("/healthz")
            assert health.status_code == 200
            assert health.json()["redis"] == "ok" and health.json()["database"] != "ok"


def test_database_and_redis_down_is_503(tmp_path: Path) -> None:
    with down_service() as down:
        store, registry = fake_store(connected=False), CollectorRegistry()
        with make_app(down, store, Clock(READ_AT_MS), registry) as client:
            http = Http(client)
            for path in ("/notes/10/graph", "/api/notes/10/graph?tokenLimit=300"):
                assert_error(http.get(path), 503)
            health = http.get("/healthz")
            assert health.status_code == 503
            body = health.json()
            assert body["status"] != "ok"
            assert body["redis"] != "ok" and body["database"] != "ok"
            assert "Traceback" not in health.text


# -- health and metrics ---------------------------------------------------------------------------
def test_healthz_reports_every_component(svc: Service) -> None:
    response = svc.http.get("/healthz", auth=False)
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "redis": "ok", "database": "ok", "feed": "ok"}


def samples(text: str) -> dict[str, float]:
    return {s.name + str(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_count_hits_misses_and_live_computes(svc: Service) -> None:
    svc.rebuild(10)
    before = svc.http.get("/metrics", auth=False)
    assert before.status_code == 200
    assert before.headers["content-type"].startswith("text/plain")
    for name in ("graphrag_cache_hits_total", "graphrag_cache_stale_total",
                 "graphrag_cache_misses_total", "graphrag_live_computes_total",
                 "graphrag_lock_waits_total", "graphrag_cas_rejections_total",
                 "graphrag_redis_errors_total", "graphrag_database_errors_total",
                 "graphrag_live_compute_seconds_bucket"):
        assert name in before.text, name
    assert samples(before.text)["graphrag_cache_hits_total[]"] == 0
    for _ in range(3):
        assert svc.http.get("/notes/10/graph", seed="0").headers["X-Graphrag-Source"] == "cache"
    assert svc.http.get("/notes/21/graph").headers["X-Graphrag-Source"] == "live"
    svc.clock.now_ms += SOFT_TTL_S * 1000
    assert svc.http.get("/notes/10/graph").headers["X-Graphrag-Source"] == "stale"
    text = svc.http.get("/metrics", auth=False).text
    assert 'graphrag_read_seconds_bucket{le="0.0001",source="cache"}' in text
    after = samples(text)
    assert after["graphrag_cache_hits_total[]"] == 3
    assert after["graphrag_cache_stale_total[]"] == 1
    assert after["graphrag_cache_misses_total[]"] == 1
    assert after["graphrag_live_computes_total[]"] == 1
    assert after["graphrag_read_seconds_count[('source', 'cache')]"] == 3
    assert after["graphrag_read_seconds_count[('source', 'live')]"] == 1
    assert after["graphrag_live_compute_seconds_count[]"] == 1
    assert svc.metric("cache_hits") == 3
