"""The reader on the Redis adapters (fakeredis, the real Redis, a local Redis Cluster), continued:
what it does when something behind it fails. With Redis down it computes live; with the database
down it serves any snapshot it has (stale or not) and a miss is unavailable; with both down every
read is unavailable; and a corrupt or foreign snapshot is a miss that gets overwritten.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest
from prometheus_client import CollectorRegistry

from graphrag import GraphRagError, NoteNotFound
from graphrag.core.errors import Unavailable
from service.context import ContextService
from service.decoding import decode_envelope
from service.envelope import SnapshotKey
from service.reader import SnapshotReader
from storage.redis.cache import RedisCache
from tests.redis.reader_contract import (
    HARD_TTL_S,
    OnFakeRedis,
    OnRealRedis,
    OnRedisCluster,
    ReaderContract,
)
from tests.redis.readers import UNKNOWN_NOTE, Calls, Clock, CountingService, down_service
from tests.support import NOW_MS


class OutagesContract(ReaderContract):
    """Redis down, the database down, both down, corrupt snapshots."""

    # -- Redis down, database down ----------------------------------------------------------------
    def test_redis_down_computes_live(
        self, prefix: str, sqlite: ContextService, counting: CountingService,
        make_reader: Callable[..., SnapshotReader], registry: CollectorRegistry,
    ) -> None:
        reader = make_reader(store_=self.store_on(self.unreachable(), prefix))
        served = reader.get(10, seed=0)
        assert (served.source, served.body) == ("live", self.live(sqlite, 10))
        small = reader.get(10, token_limit=300, seed=7)
        assert (small.source, small.body) == ("live", self.live(sqlite, 10, seed=7, limit=300))
        assert self.metric(registry, "redis_errors") == 2
        assert self.metric(registry, "live_computes") == 2
        assert counting.calls == 2
        with pytest.raises(NoteNotFound):
            reader.get(UNKNOWN_NOTE)

    def test_database_down_serves_any_snapshot_and_a_miss_is_unavailable(
        self, store: RedisCache, sqlite: ContextService, clock: Clock,
        make_reader: Callable[..., SnapshotReader], registry: CollectorRegistry,
    ) -> None:
        self.rebuild(sqlite, store, [10])
        with down_service() as down:
            reader = make_reader(service=down, on_stale=Calls())
            fresh = reader.get(10, seed=0, token_limit=300)
            assert fresh.source == "cache"
            assert fresh.body == self.live(sqlite, 10, limit=300, now_ms=NOW_MS)
            clock.now_ms = NOW_MS + HARD_TTL_S * 1000  # long past the soft TTL
            old = reader.get(10, seed=0)
            assert (old.source, old.body) == ("stale", self.stored_body(store, 10))
            with pytest.raises(Unavailable):
                reader.get(21, seed=0)
            assert self.metric(registry, "database_errors") == 1
            assert store.read(SnapshotKey(21, "wavefront", 0)) is None
            assert not list(store.redis.scan_iter(match=f"{store.keys.prefix}:lock:*"))

    def test_database_and_redis_down_is_unavailable(
        self, prefix: str, make_reader: Callable[..., SnapshotReader]
    ) -> None:
        with down_service() as down:
            reader = make_reader(service=down, store_=self.store_on(self.unreachable(), prefix))
            with pytest.raises(Unavailable) as caught:
                reader.get(10)
            assert isinstance(caught.value, GraphRagError)
            assert "10" in str(caught.value)

    # -- corrupt snapshots ------------------------------------------------------------------------
    @pytest.mark.parametrize("kind", ["garbage", "empty", "foreign-schema", "other-note", "hash"])
    def test_corrupt_or_foreign_snapshots_are_a_miss_and_get_overwritten(
        self, kind: str, store: RedisCache, sqlite: ContextService, reader: SnapshotReader,
        registry: CollectorRegistry,
    ) -> None:
        key = store.keys.snapshot(10, "wavefront", 0)
        if kind in ("foreign-schema", "other-note"):
            self.rebuild(sqlite, store, [10, 12])
            source = 12 if kind == "other-note" else 10
            obj = orjson.loads(store.read(SnapshotKey(source, "wavefront", 0)) or b"")
            if kind == "foreign-schema":
                obj["schema"] = 2
            store.redis.set(key, orjson.dumps(obj))
        elif kind == "hash":
            store.redis.hset(key, mapping={"result": "x", "schema": "1"})
        else:
            store.redis.set(key, b"\x00\xff{not json" if kind == "garbage" else b"")
        served = reader.get(10, seed=0)
        assert (served.source, served.body) == ("live", self.live(sqlite, 10))
        assert self.metric(registry, "cache_misses") == 1
        assert store.redis.type(key) == b"string"
        env = decode_envelope(store.redis.get(key))
        assert env is not None and (env.note_id, env.seed, env.strategy) == (10, 0, "wavefront")
        again = reader.get(10, seed=0)
        assert (again.source, again.body) == ("cache", served.body)


class TestReaderFakeRedis(OnFakeRedis, OutagesContract):
    pass


@pytest.mark.redis
class TestReaderRealRedis(OnRealRedis, OutagesContract):
    pass


@pytest.mark.redis
class TestReaderRedisCluster(OnRedisCluster, OutagesContract):
    pass
