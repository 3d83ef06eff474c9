"""What only one kind of :class:`service.ports.SnapshotCache` backend can show. On Redis (fakeredis,
the real Redis, a local Redis Cluster): every key written carries a TTL but the edit sequence, a key
of a foreign type is a miss and gets overwritten, and a server holding only some of the scripts gets
them all before a first write. In memory: snapshots expire after the hard TTL.
"""

from __future__ import annotations

from typing import Any

import pytest

from storage.memory import MemoryState
from storage.redis.cache import RedisCache
from storage.redis.scripts import WRITE_LUA
from tests.contracts.backends import HARD_TTL_S, SOFT_TTL_S, MemoryBackend
from tests.contracts.cache_contract import CacheContract, envelope, wf, write
from tests.redis.readers import snapshot_of
from tests.support import NOW_MS


class RedisCacheContract(CacheContract):
    """What only a Redis-backed cache can show: key TTLs and foreign key types."""

    # -- TTLs and key types (Redis only) ---------------------------------------------------------
    def test_every_key_written_carries_a_ttl(self, store: Any) -> None:
        store.bump_generations([1, 2])
        store.write_many([envelope(1, 0, [2, 3]), envelope(2, 0, [3], strategy="layered", limit=2_500)])
        store.delete_focus(1, generation=None)
        write(store, envelope(1, store.generations([1])[1], [4]))
        store.stamp_touched([3, 4])
        hard_ms = HARD_TTL_S * 1000
        keys = sorted(store.redis.scan_iter(match=store.keys.pattern(), count=1000))
        kinds = {key: key.decode()[len(store.keys.prefix) + 1:].split(":")[0] for key in keys}
        assert set(kinds.values()) == {"snap", "gen", "dep", "shows", "touched", "seq"}
        for key, kind in kinds.items():
            ttl_ms = store.redis.pttl(key)
            if kind == "seq":
                assert ttl_ms == -1, "the global edit sequence is the one persistent key"
            elif kind == "snap":
                assert hard_ms - 60_000 < ttl_ms <= hard_ms, key
            elif kind in ("gen", "dep", "shows"):
                assert ttl_ms > hard_ms, key  # the index outlives every snapshot it describes
            else:
                assert ttl_ms > 0, key

    def test_a_foreign_key_type_is_a_miss_and_gets_overwritten(self, store: Any) -> None:
        key = store.keys.snapshot(1, "wavefront", 0)
        store.redis.rpush(key, b"x")
        assert store.read(wf(1)) is None
        store.redis.hset(store.keys.generation(1), "x", "1")
        assert store.read_current(wf(1)) == (None, 0)
        store.redis.delete(store.keys.generation(1))
        assert write(store, envelope(1, 0, [2]))
        assert snapshot_of(store, 1, "wavefront", 0) == envelope(1, 0, [2])


    def test_a_server_holding_some_of_the_scripts_gets_all_before_a_first_write(
        self, store: Any,
    ) -> None:
        """An older worker fed the server some of the scripts (a rolling upgrade): a new process
        loads them all before its first write, so no attempt runs the CAS scripts without the
        index scripts (a dependency dropped in that attempt would stay in ``dep:``)."""
        assert write(store, envelope(3, 0, [7, 8]))
        store.redis.script_flush()
        store.redis.script_load(WRITE_LUA)
        fresh = RedisCache(store.redis, prefix=store.keys.prefix, soft_ttl_s=SOFT_TTL_S,
                           hard_ttl_s=HARD_TTL_S)
        assert write(fresh, envelope(3, 0, [7]))
        assert fresh.dependents([8]) == set()
        self.assert_index_matches(store)


class TestMemoryCache(CacheContract):
    backend_name = "memory"

    def test_snapshots_expire_after_the_hard_ttl(self) -> None:
        clock = [NOW_MS]
        state = MemoryState(clock_ms=lambda: clock[0])
        store = MemoryBackend(state).cache
        assert write(store, envelope(1, 0, [2]))
        clock[0] += HARD_TTL_S * 1000 - 1
        assert store.read(wf(1)) is not None
        clock[0] += 1
        assert store.read(wf(1)) is None


class TestFakeRedisCache(RedisCacheContract):
    backend_name = "fakeredis"


@pytest.mark.redis
class TestRealRedisCache(RedisCacheContract):
    backend_name = "redis"


@pytest.mark.redis
class TestClusterCache(RedisCacheContract):
    backend_name = "cluster"
