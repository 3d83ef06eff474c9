"""A private cache Redis, a private broker Redis and MariaDB behind a proxy (issue 6, item 2).

:class:`Outage` holds MariaDB (a direct ``engine`` for Doughnut's edits, a :class:`TcpProxy` that
can be cut for the service), two private ``redis-server`` instances (the cache and the broker, as
deployed), the settings, and workers on demand; :func:`outage` (a fixture) builds a fresh one per
test and tears it all down. test_crashes.py kills, flushes and cuts them.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from service.context import ContextService
from service.reader import SnapshotReader
from storage.database import open_engine
from storage.redis.cache import RedisCache as SnapshotStore
from storage.redis.queue import RedisDirtySet as DirtySet
from tests.conftest import mariadb_database, mysql_base_url, url_string
from tests.e2e.conftest import Workers, worker_env
from tests.reliability.checks import check_snapshots
from tests.reliability.edits import generated_rows
from tests.reliability.harness import SECRET, TOKEN, Broker, settings_from, settle
from tests.reliability.servers import RedisServer, TcpProxy
from tests.wiring import (
    NoteStore,
    build_reader,
    build_redis,
    build_service,
    build_snapshot_store,
    rebuild_notes,
)
from worker.http.server import build_http_app
from worker.settings import Settings


@dataclass
class Outage:
    """MariaDB (direct ``engine`` for Doughnut's edits, ``proxy`` for the service), two private
    redis-servers (the cache and the broker, as deployed), settings, and workers on demand."""

    folder: Path
    engine: Engine
    proxy: TcpProxy
    cache: RedisServer  # snapshots (db 0), as `redis-cache` in docker-compose.yml
    broker_server: RedisServer  # the Celery broker (db 0), as `redis-broker`
    env: dict[str, str]
    settings: Settings
    service: ContextService
    store: SnapshotStore
    workers: Workers
    rows: list[dict[str, Any]]

    @property
    def dirty(self) -> DirtySet:
        return DirtySet(self.store.redis, self.store.keys)

    def broker(self) -> Broker:
        return Broker(redis.Redis.from_url(self.broker_server.url(0), socket_timeout=5))

    def reader(self, **overrides: str) -> SnapshotReader:
        """A reader of its own (settings plus ``overrides``, e.g. a 1 s soft TTL)."""
        settings = settings_from({**self.env, **overrides})
        return build_reader(settings, self.service, build_snapshot_store(settings, self.store.redis))

    def http(self, **overrides: str) -> TestClient:
        return TestClient(build_http_app(settings_from({**self.env, **overrides})),
                          raise_server_exceptions=False)

    def rebuild_all(self) -> None:
        ids = NoteStore(self.engine).live_ids_after(0, 10**6)
        report = rebuild_notes(self.settings, self.service, self.store, ids)
        assert report.errors == {}, report.summary()

    def check(self) -> None:
        report = check_snapshots(self.engine, self.store, self.settings, self.service)
        assert report.bad == 0, report.summary()

    def quiet(self, timeout_s: float) -> None:
        broker = self.broker()
        try:
            settle(self.store, self.dirty, broker, timeout_s=timeout_s,
                   details=lambda: self.workers.current.tail(40) if self.workers.started else "")
        finally:
            broker.redis.close()


@pytest.fixture
def outage(tmp_path: Path) -> Iterator[Outage]:
    rows = generated_rows(80, random.Random(5))
    (tmp_path / "cache").mkdir()
    (tmp_path / "broker").mkdir()
    cache = RedisServer(tmp_path / "cache").start()
    broker_server = RedisServer(tmp_path / "broker").start()
    base = mysql_base_url()
    proxy = TcpProxy((base.host or "127.0.0.1", base.port or 3306)).start()
    workers: Workers | None = None
    service: ContextService | None = None
    try:
        with mariadb_database() as url:
            engine = open_engine(url_string(url))
            NoteStore(engine).create_table()
            NoteStore(engine).insert(rows)
            proxied = url_string(url.set(host="127.0.0.1", port=proxy.port))
            env = {"GRAPHRAG_DATABASE_URL": proxied, "GRAPHRAG_REDIS_URL": cache.url(0),
                   "CELERY_BROKER_URL": broker_server.url(0),
                   "GRAPHRAG_REDIS_PREFIX": f"graphrag-reliability:{uuid.uuid4().hex}:v1",
                   "GRAPHRAG_WEBHOOK_SECRET": SECRET, "GRAPHRAG_READER_TOKEN": TOKEN,
                   "GRAPHRAG_STRATEGIES": "wavefront,layered", "GRAPHRAG_SEEDS": "0"}
            settings = settings_from(env)
            service = build_service(settings)
            store = build_snapshot_store(settings, build_redis(settings))
            workers = Workers(worker_env(env), tmp_path)
            try:
                yield Outage(tmp_path, engine, proxy, cache, broker_server, env, settings, service,
                             store, workers, rows)
            finally:
                workers.stop_all()
                service.store.engine.dispose()
                engine.dispose()
    finally:
        proxy.close()
        cache.stop()
        broker_server.stop()
