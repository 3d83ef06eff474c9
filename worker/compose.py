"""The composition root: settings in, wired objects out. Nothing below ``worker`` reads settings."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from graphrag import (
    CharsCounter,
    OnePerNoteCounter,
    StrategyParams,
    TiktokenCounter,
    TokenCounter,
)
from graphrag.errors import ConfigurationError
from storage.context import ContextService, open_engine
from storage.dirty import DirtySet
from storage.encodings import load_cl100k
from storage.metrics import ReaderMetrics
from storage.reader import ReaderConfig, SnapshotReader
from storage.rebuild import RebuildReport, rebuild
from storage.snapshots import SnapshotStore
from storage.sql import NoteStore
from worker.settings import Settings

__all__ = [
    "build_counter",
    "build_reader",
    "build_redis",
    "build_service",
    "build_snapshot_store",
    "build_store",
    "reader_config",
    "rebuild_notes",
    "wall_ms",
]


def build_counter(name: str, settings: Settings) -> TokenCounter:
    """The token counter called ``name``; tiktoken's file is loaded offline and hash-checked."""
    if name == "chars":
        return CharsCounter()
    if name == "one-per-note":
        return OnePerNoteCounter()
    return TiktokenCounter(load_cl100k(settings.tiktoken_file).encode_ordinary)


def build_store(settings: Settings) -> NoteStore:
    return NoteStore(open_engine(settings.database_url), in_chunk=settings.in_chunk)


def build_service(settings: Settings, counter_name: str | None = None) -> ContextService:
    counter = build_counter(counter_name or settings.token_counter, settings)
    return ContextService(build_store(settings), counter, StrategyParams())


def build_redis(settings: Settings) -> redis.Redis:
    """A Redis client with short timeouts and one quick retry: a reader must fail over fast."""
    timeout_s = settings.redis_timeout_ms / 1000
    try:
        return redis.Redis.from_url(
            settings.redis_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
            retry=Retry(ExponentialBackoff(cap=0.05, base=0.005), retries=1),
            health_check_interval=30,
        )
    except ValueError as err:
        raise ConfigurationError(f"GRAPHRAG_REDIS_URL: {err}") from err


def build_snapshot_store(settings: Settings, client: redis.Redis) -> SnapshotStore:
    return SnapshotStore(client, prefix=settings.redis_prefix, soft_ttl_s=settings.soft_ttl_s,
                         hard_ttl_s=settings.hard_ttl_s)


def reader_config(settings: Settings) -> ReaderConfig:
    return ReaderConfig(
        strategies=settings.strategies, seeds=settings.seeds,
        max_token_limit=settings.max_token_limit, layered_limits=settings.layered_limits,
        lock_ttl_ms=settings.lock_ttl_ms, lock_wait_ms=settings.lock_wait_ms,
    )


def build_reader(
    settings: Settings, service: ContextService, store: SnapshotStore, *,
    metrics: ReaderMetrics | None = None, on_stale: Callable[[int], None] | None = None,
) -> SnapshotReader:
    dirty = DirtySet(store.redis, store.keys)
    return SnapshotReader(service, store, reader_config(settings), metrics=metrics,
                          on_stale=on_stale,
                          on_raced=lambda note_id: dirty.add([note_id], now_ms=wall_ms()))


def wall_ms() -> int:
    """The wall clock in epoch milliseconds (read here, at the root, and passed down)."""
    return time.time_ns() // 1_000_000


def rebuild_notes(
    settings: Settings, service: ContextService, store: SnapshotStore, note_ids: Iterable[int],
    *, progress: Callable[[int], None] | None = None,
) -> RebuildReport:
    """Rebuild every configured snapshot (strategies x seeds [x layered limits]) of ``note_ids``."""
    return rebuild(service, store, note_ids, strategies=settings.strategies, seeds=settings.seeds,
                   max_token_limit=settings.max_token_limit,
                   layered_limits=settings.layered_limits, now_ms=wall_ms(),
                   epoch_size=settings.rebuild_page, progress=progress)
