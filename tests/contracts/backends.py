"""The cache backends every Redis-side contract runs against: in-memory, fakeredis, real Redis.

A :class:`CacheBackend` bundles the four ports (cache, dirty set, coordination, progress) on one
isolated store, plus the few test-only hooks a contract needs to simulate what happens behind a
port's back (a counter evicted, a snapshot expired, garbage planted) and to look inside (the reverse
index). Subclasses of each contract pick a backend with the ``backend`` fixture.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from service.decoding import decode_envelope
from service.envelope import SnapshotKey
from storage.memory import (
    MemoryCoordination,
    MemoryDirtySet,
    MemoryFeedHeartbeat,
    MemoryPositions,
    MemoryProgress,
    MemoryState,
)
from storage.memory_binding import MemoryBinding
from storage.memory_cache import MemoryCache
from storage.memory_changes import MemoryChanges
from storage.redis.binding import RedisBinding
from storage.redis.cache import RedisCache
from storage.redis.changes import RedisChanges
from storage.redis.client import build_client, delete_prefix
from storage.redis.coordination import RedisCoordination
from storage.redis.keys import Keys
from storage.redis.positions import RedisFeedHeartbeat, RedisPositions
from storage.redis.progress import RedisProgress
from storage.redis.queue import RedisDirtySet
from tests.ports import free_port
from tests.redis.readers import fake_redis, index_mismatches, real_redis, unreachable_redis
from tests.services import ServiceUnavailable
from tests.services.redis_cluster import shared_cluster

__all__ = ["CacheBackend", "MemoryBackend", "RedisBackend", "backend_named"]

SOFT_TTL_S, HARD_TTL_S = 3_600, 7_200


@dataclass
class CacheBackend:
    """Four ports on one store, and hooks behind their backs."""

    cache: Any
    dirty: Any
    coordination: Any
    name: str

    def progress(self, name: str = "nightly") -> Any:
        raise NotImplementedError

    def positions(self) -> Any:
        """Change capture's position store on this store."""
        raise NotImplementedError

    def heartbeat(self) -> Any:
        """Change capture's heartbeat on this store."""
        raise NotImplementedError

    def binding(self) -> Any:
        """The database this store's prefix belongs to."""
        raise NotImplementedError

    def dirty_queue(self, shards: int) -> Any:
        """A dirty set with ``shards`` shards on this store."""
        raise NotImplementedError

    def changes(self) -> Any:
        """Where watchers hear of this store's snapshot writes."""
        raise NotImplementedError

    def lose_generation(self, note_id: int) -> None:
        raise NotImplementedError

    def lose_seq(self) -> None:
        raise NotImplementedError

    def expire(self, key: SnapshotKey) -> None:
        raise NotImplementedError

    def plant(self, key: SnapshotKey, data: bytes) -> None:
        raise NotImplementedError

    def has_shows(self, focus: int) -> bool:
        raise NotImplementedError

    def index_mismatches(self) -> dict[int, tuple[set[int], set[int]]]:
        raise NotImplementedError


class MemoryBackend(CacheBackend):
    def __init__(self, state: MemoryState) -> None:
        super().__init__(MemoryCache(state, soft_ttl_s=SOFT_TTL_S, hard_ttl_s=HARD_TTL_S),
                         MemoryDirtySet(state), MemoryCoordination(state), "memory")
        self.state = state

    def progress(self, name: str = "nightly") -> MemoryProgress:
        return MemoryProgress(self.state, name)

    def positions(self) -> MemoryPositions:
        return MemoryPositions(self.state)

    def heartbeat(self) -> MemoryFeedHeartbeat:
        return MemoryFeedHeartbeat(self.state)

    def binding(self) -> MemoryBinding:
        return MemoryBinding(self.state)

    def changes(self) -> MemoryChanges:
        return MemoryChanges(self.state)

    def dirty_queue(self, shards: int) -> MemoryDirtySet:
        return MemoryDirtySet(self.state, shards=shards)

    def lose_generation(self, note_id: int) -> None:
        self.state.generations.pop(note_id, None)

    def lose_seq(self) -> None:
        self.state.seq = 0

    def expire(self, key: SnapshotKey) -> None:
        self.state.snapshots.pop(key, None)

    def plant(self, key: SnapshotKey, data: bytes) -> None:
        self.state.snapshots[key] = (data, self.state.clock_ms() + HARD_TTL_S * 1000)

    def has_shows(self, focus: int) -> bool:
        return bool(self.state.shows.get(focus))

    def index_mismatches(self) -> dict[int, tuple[set[int], set[int]]]:
        expected: dict[int, set[int]] = {}
        for data, _ in self.state.snapshots.values():
            env = decode_envelope(data)
            assert env is not None
            for shown in env.depends_on:
                expected.setdefault(shown, set()).add(env.note_id)
        actual = {x: set(foci) for x, foci in self.state.deps.items() if foci}
        return {n: (expected.get(n, set()), actual.get(n, set()))
                for n in expected.keys() | actual.keys()
                if expected.get(n, set()) != actual.get(n, set())}


class RedisBackend(CacheBackend):
    def __init__(self, client: Any, prefix: str, name: str, *, pinned: bool = False) -> None:
        keys = Keys(prefix)
        cache = RedisCache(client, prefix=prefix, soft_ttl_s=SOFT_TTL_S, hard_ttl_s=HARD_TTL_S)
        super().__init__(cache.pinned() if pinned else cache,
                         RedisDirtySet(client, keys), RedisCoordination(client, keys), name)
        self.client, self.keys = client, keys

    def progress(self, name: str = "nightly") -> RedisProgress:
        return RedisProgress(self.client, self.keys, name)

    def positions(self) -> RedisPositions:
        return RedisPositions(self.client, self.keys)

    def heartbeat(self) -> RedisFeedHeartbeat:
        return RedisFeedHeartbeat(self.client, self.keys)

    def binding(self) -> RedisBinding:
        return RedisBinding(self.client, self.keys)

    def changes(self) -> RedisChanges:
        return RedisChanges(self.client, self.keys)

    def dirty_queue(self, shards: int) -> RedisDirtySet:
        return RedisDirtySet(self.client, self.keys, shards=shards)

    def lose_generation(self, note_id: int) -> None:
        self.client.delete(self.keys.generation(note_id))

    def lose_seq(self) -> None:
        self.client.delete(self.keys.seq())

    def _name(self, key: SnapshotKey) -> str:
        return self.keys.snapshot(key.note_id, key.strategy, key.seed, key.token_limit)

    def expire(self, key: SnapshotKey) -> None:
        self.client.delete(self._name(key))

    def plant(self, key: SnapshotKey, data: bytes) -> None:
        self.client.set(self._name(key), data)

    def has_shows(self, focus: int) -> bool:
        return bool(self.client.exists(self.keys.shows(focus)))

    def index_mismatches(self) -> dict[int, tuple[set[int], set[int]]]:
        return index_mismatches(self.cache)


@contextmanager
def backend_named(name: str, *, connected: bool = True) -> Iterator[CacheBackend]:
    """A fresh, isolated backend: ``memory``, ``fakeredis``, ``redis`` (the real one), ``pinned``
    (the real one, the cache reading through a connection of its own: RedisCache.pinned) or
    ``cluster`` (the test process's local 3-primary Redis Cluster, through the service's own client);
    ``connected=False`` gives one whose every call fails as an unreachable Redis does."""
    prefix = f"graphrag-test:{uuid.uuid4().hex}:v1"
    if name == "memory":
        yield MemoryBackend(MemoryState(down=not connected))
    elif name == "fakeredis":
        yield RedisBackend(fake_redis(connected=connected), prefix, name)
    elif name == "cluster":
        with cluster_client(connected) as client:
            yield RedisBackend(client, prefix, name)
            if connected:
                delete_prefix(client, prefix)
    elif not connected:
        yield RedisBackend(unreachable_redis(), prefix, name, pinned=name == "pinned")
    else:
        with real_redis(prefix) as client:
            yield RedisBackend(client, prefix, name, pinned=name == "pinned")


@contextmanager
def cluster_client(connected: bool = True) -> Iterator[Any]:
    """The service's cluster client on the shared local cluster (or on a port nothing listens on)."""
    if not connected:
        yield build_client(f"redis://127.0.0.1:{free_port()}", timeout_ms=200, cluster=True)
        return
    try:
        url = shared_cluster().startup_url
    except ServiceUnavailable as err:
        pytest.fail(str(err), pytrace=False)
    client = build_client(url, timeout_ms=5_000, cluster=True)
    try:
        yield client
    finally:
        client.close()
