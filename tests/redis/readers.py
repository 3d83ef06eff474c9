"""Shared helpers for the reader tests: a small note graph in SQLite, counting wrappers, a clock.

* :func:`reader_graph` is a hand-built Doughnut graph of a few dozen notes (a tree with siblings,
  link notes pointing across it, a deleted note and a deleted link note);
* :func:`sqlite_service` loads it into a SQLite file and returns a :class:`ContextService` on it;
* :class:`CountingService` counts ``compute_many`` calls, :class:`SqlCounter` counts SQL statements,
  :class:`CountingRedis` counts Redis client method calls, :class:`Clock` is a settable clock.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from sqlalchemy import event
from sqlalchemy.engine import Engine

from graphrag import CharsCounter, Costing, StrategyParams
from service.context import Computed, ContextService
from service.decoding import decode_envelope
from service.envelope import SnapshotKey
from storage.database import open_engine
from storage.profiles.doughnut_2025 import Doughnut2025
from storage.redis.cache import RedisCache
from storage.redis.keys import Keys
from tests.conftest import new_store
from tests.ports import free_port
from tests.storage.graphs import load_graph
from tests.support import DAY_MS, NOW_MS, Graph

REDIS_URL_ENV = "GRAPHRAG_TEST_REDIS_URL"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: A database URL nothing listens on (port 1): every connection attempt is refused at once.
DOWN_DATABASE_URL = "mysql+pymysql://root@127.0.0.1:1/x"
TOKEN = "s3cret-reader-token"

DELETED_NOTE = 40
DELETED_LINK = 41
UNKNOWN_NOTE = 9_999


def reader_graph() -> Graph:
    """About forty notes: a three-level tree, siblings, cross links, a deleted note and link."""
    g = Graph()
    g.add(1, title="Animals", details="Living things that move and eat other living things.")
    topics = {2: "Mammals", 3: "Birds", 4: "Fish", 5: "Reptiles", 6: "Insects", 7: "Amphibians"}
    for order, (note_id, title) in enumerate(topics.items()):
        g.add(note_id, parent_id=1, sibling_order=order * 10, title=title,
              details=f"{title} are a class of animals.", created_at_ms=NOW_MS - note_id * DAY_MS)
    kids = {
        2: {10: "Cat", 11: "Dog", 12: "Whale", 13: "Bat", 14: "Mouse", 15: "Horse"},
        3: {20: "Sparrow", 21: "Eagle", 22: "Penguin", 23: "Owl"},
        4: {25: "Salmon", 26: "Shark", 27: "Tuna"},
        5: {28: "Gecko", 29: "Turtle"},
    }
    for parent, children in kids.items():
        for order, (note_id, title) in enumerate(children.items()):
            g.add(note_id, parent_id=parent, sibling_order=order, title=title,
                  details=f"The {title.lower()} is a {topics[parent].lower()[:-1]}. " * 2,
                  created_at_ms=NOW_MS - (note_id % 9) * DAY_MS)
    g.add(16, parent_id=10, title="Kitten", details="A young cat.")
    g.add(17, parent_id=10, title="Lion", details="A big cat.")
    g.add(18, parent_id=11, title="Puppy", details="A young dog.")
    # link notes: parent = where the link lives, target = what it points at
    g.add(30, parent_id=10, target_id=20, title="hunts", details="Cats hunt small birds.")
    g.add(31, parent_id=21, target_id=10, title="preys on")
    g.add(32, parent_id=12, target_id=4, title="is not a")
    g.add(33, parent_id=1, target_id=11, title="best friend")
    g.add(34, parent_id=13, target_id=23, title="flies at night like")
    g.add(35, parent_id=26, target_id=12, title="smaller than")
    g.add(36, parent_id=22, target_id=25, title="eats")
    g.add(DELETED_NOTE, parent_id=2, title="Unicorn", details="Never existed.", deleted=True)
    g.add(DELETED_LINK, parent_id=6, target_id=10, title="bites", deleted=True)
    g.add(42, parent_id=DELETED_NOTE, title="Orphan under a deleted note")
    return g


@contextmanager
def sqlite_service(directory: Path) -> Iterator[ContextService]:
    """A ContextService on a fresh SQLite file holding :func:`reader_graph`."""
    engine = open_engine(f"sqlite:///{directory / 'notes.db'}")
    notes = new_store(engine)
    load_graph(notes, reader_graph())
    try:
        yield ContextService(notes, CharsCounter(), StrategyParams())
    finally:
        engine.dispose()


@contextmanager
def down_service() -> Iterator[ContextService]:
    """A ContextService whose database cannot be reached."""
    engine = open_engine(DOWN_DATABASE_URL)
    try:
        yield ContextService(Doughnut2025(engine), CharsCounter(), StrategyParams())
    finally:
        engine.dispose()


class CountingService(ContextService):
    """A ContextService that counts (and can hook into) ``compute_many`` calls; thread-safe."""

    def __init__(self, inner: ContextService, before: Callable[[], object] | None = None) -> None:
        super().__init__(inner.store, inner.counter, inner.params)
        self.before = before
        self.calls = 0
        self.requests: list[Any] = []
        self._lock = threading.Lock()

    def compute_many(self, requests: Sequence[Any], strategy: str,
                     costing: Costing | None = None) -> Computed:
        with self._lock:
            self.calls += 1
            self.requests.extend(requests)
        if self.before is not None:
            hook, self.before = self.before, None  # once
            hook()
        return super().compute_many(requests, strategy, costing)


class SqlCounter:
    """Counts the statements an engine executes (``before_cursor_execute``)."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.count = engine, 0
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, *_: Any) -> None:
        self.count += 1

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)


class CountingRedis:
    """Forwards everything to a redis client and records the name of every method called."""

    def __init__(self, inner: redis.Redis) -> None:
        self._inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return value(*args, **kwargs)

        return call


class Clock:
    """A settable epoch-milliseconds clock for ``SnapshotReader(clock_ms=...)``."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


class Calls:
    """A thread-safe recording callback (e.g. ``on_stale``)."""

    def __init__(self) -> None:
        self.args: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, arg: Any) -> None:
        with self._lock:
            self.args.append(arg)


def unique_prefix() -> str:
    return f"graphrag-test:{uuid.uuid4().hex}:v1"


def redis_url() -> str:
    return os.environ.get(REDIS_URL_ENV, "").strip() or DEFAULT_REDIS_URL


def unreachable_redis() -> redis.Redis:
    """A real client on a port nothing listens on, failing fast (no retries, short timeouts)."""
    return redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.2,
                       socket_timeout=0.2, retry=Retry(NoBackoff(), 0))


def delete_prefix(client: redis.Redis, prefix: str) -> None:
    stale = list(client.scan_iter(match=Keys(prefix).pattern(), count=1000))
    if stale:
        client.delete(*stale)


@contextmanager
def real_redis(prefix: str, **options: Any) -> Iterator[redis.Redis]:
    """A client of the real Redis (the test fails, never skips, when it is unreachable); the keys
    under ``prefix`` are deleted afterwards."""
    client = redis.Redis.from_url(redis_url(), socket_timeout=5, socket_connect_timeout=2, **options)
    try:
        client.ping()
    except (redis.ConnectionError, redis.TimeoutError) as err:
        pytest.fail(f"the real Redis is required but not reachable at {redis_url()} ({err}); start "
                    f"it or point {REDIS_URL_ENV} at one", pytrace=False)
    try:
        yield client
    finally:
        delete_prefix(client, prefix)
        client.close()


def fake_redis(*, connected: bool = True) -> redis.Redis:
    """A fakeredis client on a server of its own; ``connected=False``: every call fails."""
    server = fakeredis.FakeServer()
    server.connected = connected
    return fakeredis.FakeRedis(server=server)


def snapshot_of(cache: Any, note_id: int, strategy: str, seed: int,
                token_limit: int | None = None) -> Any:
    """The decoded envelope stored under one key of any cache (None: miss or undecodable)."""
    return decode_envelope(cache.read(SnapshotKey(note_id, strategy, seed, token_limit)))


def index_mismatches(store: RedisCache) -> dict[int, tuple[set[int], set[int]]]:
    """Notes whose ``dep`` set differs from what the stored snapshots show: id -> (expected, actual)."""
    prefix = store.keys.prefix
    expected: dict[int, set[int]] = {}
    for key in store.redis.scan_iter(match=f"{prefix}:snap:*", count=1000):
        env = decode_envelope(store.redis.get(key))
        assert env is not None, key
        for shown in env.depends_on:
            expected.setdefault(shown, set()).add(env.note_id)
    actual = {
        int(k.decode().rsplit("{", 1)[1].rstrip("}")): {int(m) for m in store.redis.smembers(k)}
        for k in store.redis.scan_iter(match=f"{prefix}:dep:*", count=1000)
    }
    return {n: (expected.get(n, set()), actual.get(n, set()))
            for n in expected.keys() | actual.keys() if expected.get(n, set()) != actual.get(n, set())}
