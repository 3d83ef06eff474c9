"""Test plumbing: the composition root's objects built from settings one at a time.

Several suites hold a cache, a service and a dirty set side by side (sharing one Redis client);
these helpers build each from settings through :class:`worker.compose.Wiring`, and convert rows
written as Doughnut 2025 column dicts into note records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from service.context import ContextService
from service.reader import SnapshotReader
from service.rebuild import RebuildReport, rebuild
from storage.profiles.admin_2025 import create_tables, insert_notes
from storage.profiles.doughnut_2025 import Doughnut2025
from storage.records import TreeNote
from storage.redis.cache import RedisCache
from storage.redis.coordination import RedisCoordination
from storage.redis.queue import RedisDirtySet
from worker.compose import Wiring, wall_ms
from worker.settings import Settings

__all__ = [
    "NoteStore",
    "build_reader",
    "build_redis",
    "build_service",
    "build_snapshot_store",
    "dirty_of",
    "insert_rows",
    "rebuild_notes",
    "records",
    "wall_ms",
]


def build_redis(settings: Settings) -> Any:
    return Wiring(settings).client


def build_service(settings: Settings, counter_name: str | None = None) -> ContextService:
    return Wiring(settings, counter_name=counter_name).service


def build_snapshot_store(settings: Settings, client: Any) -> RedisCache:
    return Wiring(settings, redis_client=client).cache


def dirty_of(store: RedisCache) -> RedisDirtySet:
    return RedisDirtySet(store.redis, store.keys)


def _wiring(settings: Settings, service: ContextService, store: RedisCache) -> Wiring:
    wiring = Wiring(settings, redis_client=store.redis)
    wiring.__dict__.update(service=service, source=service.store, cache=store)
    return wiring


def rebuild_notes(settings: Settings, service: ContextService, store: RedisCache,
                  note_ids: Iterable[int]) -> RebuildReport:
    wiring = _wiring(settings, service, store)
    s = settings
    return rebuild(service, store, note_ids, strategies=wiring.strategies(), seeds=s.seeds,
                   max_token_limit=s.max_token_limit, layered_limits=s.layered_limits,
                   now_ms=wall_ms(), epoch_size=s.rebuild_page)


def build_reader(settings: Settings, service: ContextService, store: RedisCache) -> SnapshotReader:
    return _wiring(settings, service, store).reader()


def coordination_of(store: RedisCache) -> RedisCoordination:
    return RedisCoordination(store.redis, store.keys)


_FIELDS = {"topic_constructor": "title", "description": "details"}


def records(rows: Iterable[Mapping[str, Any]]) -> list[TreeNote]:
    """Column-named 2025 rows as note records (unread columns dropped)."""
    keep = {f.name for f in dataclasses.fields(TreeNote)}
    return [TreeNote(**{_FIELDS.get(k, k): v for k, v in row.items() if _FIELDS.get(k, k) in keep})
            for row in rows]


def insert_rows(engine: Any, rows: Iterable[Mapping[str, Any]]) -> None:
    """Create the 2025 table if needed and insert column-named rows."""
    create_tables(engine)
    insert_notes(engine, records(rows))


class NoteStore(Doughnut2025):
    """The 2025 source plus the demo writes the reliability suites use on it, with their old names."""

    def create_table(self) -> None:
        create_tables(self.engine)

    def insert(self, rows: Iterable[Mapping[str, Any]], *, chunk: int = 1000) -> None:
        insert_notes(self.engine, records(rows), chunk=chunk)

    def check_schema(self) -> None:
        self.check()

    def load(self, view: Any, need: Any) -> None:
        with self.batch() as load:
            load(view, need)
