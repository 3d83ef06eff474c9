"""The reader (:class:`service.reader.SnapshotReader`) on the Redis adapters: fakeredis, the real
Redis and a local Redis Cluster. Here how it serves: a fresh hit is one MGET and no SQL; a stale
snapshot is served while one refresh is queued per note; a burst of readers of a cold or outdated
note computes once; a live write-back never overwrites a newer generation; and every key the reader
writes has a TTL. Limits and seeds, outages and corrupt snapshots, and bad input are in the sibling
``test_reader_*`` modules (:mod:`tests.redis.reader_contract` holds the base they share).

The real Redis is ``GRAPHRAG_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); when it cannot
be reached the tests fail (never skip). Each test works under its own key prefix and deletes its keys
afterwards. The notes live in a SQLite file built from :func:`tests.redis.readers.reader_graph`; the
reader's clock is a settable :class:`~tests.redis.readers.Clock`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest
import redis
from prometheus_client import CollectorRegistry

from graphrag import GraphRagError, Request, StrategyParams, config_hash
from service.context import ContextService
from service.envelope import Envelope, SnapshotKey
from service.reader import Served, SnapshotReader
from storage.redis.cache import RedisCache
from tests.redis.reader_contract import (
    BURST,
    HARD_TTL_S,
    MAX_LIMIT,
    READ_AT_MS,
    SOFT_TTL_S,
    OnFakeRedis,
    OnRealRedis,
    OnRedisCluster,
    ReaderContract,
)
from tests.redis.readers import (
    Calls,
    Clock,
    CountingRedis,
    CountingService,
    SqlCounter,
    index_mismatches,
    snapshot_of,
)
from tests.support import NOW_MS

PAST_SOFT_TTL_MS = NOW_MS + SOFT_TTL_S * 1000 + 5


def in_parallel(count: int, call: Callable[[], Served]) -> list[Served]:
    """Run ``call`` on ``count`` threads released together by a barrier."""
    barrier = threading.Barrier(count, timeout=20)

    def run() -> Served:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(run) for _ in range(count)]
        return [f.result(timeout=60) for f in futures]


class ServingContract(ReaderContract):
    """Fresh hits, stale reads, misses and bursts, the write-back's compare-and-set, TTLs."""

    # -- fresh hit --------------------------------------------------------------------------------
    def test_fresh_hit_is_one_mget_and_no_sql(
        self, client: redis.Redis, prefix: str, sqlite: ContextService, counting: CountingService,
        make_reader: Callable[..., SnapshotReader], registry: CollectorRegistry,
    ) -> None:
        counted = CountingRedis(client)
        store = self.store_on(counted, prefix)
        self.rebuild(sqlite, store, [10])
        reader = make_reader(store_=store)
        sql = SqlCounter(sqlite.store.engine)
        try:
            for limit, seed, strategy in [(None, 0, None), (300, 7, "wavefront"),
                                          (None, 0, "relationship-bfs"), (400, 7, "layered")]:
                counted.calls.clear()
                served = reader.get(10, token_limit=limit, seed=seed, strategy=strategy)
                assert served.source == "cache"
                assert counted.calls == ["mget"], "a fresh hit is one MGET (snapshot and generation)"
            assert sql.count == 0
            assert counting.calls == 0
        finally:
            sql.close()
        served = reader.get(10, seed=0)
        assert served.body == self.stored_body(store, 10)
        assert served.body == self.live(sqlite, 10, now_ms=NOW_MS)
        assert served.age_s == pytest.approx(1.0)
        assert self.metric(registry, "cache_hits") == 5
        assert self.metric(registry, "cache_misses") == self.metric(registry, "live_computes") == 0

    # -- stale ------------------------------------------------------------------------------------
    def test_stale_is_served_and_one_refresh_is_queued_under_a_burst(
        self, store: RedisCache, sqlite: ContextService, counting: CountingService, clock: Clock,
        make_reader: Callable[..., SnapshotReader], registry: CollectorRegistry,
    ) -> None:
        self.rebuild(sqlite, store, [10])
        fresh = self.stored_body(store, 10)
        clock.now_ms = PAST_SOFT_TTL_MS
        refreshes = Calls()
        reader = make_reader(on_stale=refreshes)
        results = in_parallel(BURST, lambda: reader.get(10, seed=0))
        assert {r.source for r in results} == {"stale"}
        assert {r.body for r in results} == {fresh}
        assert results[0].age_s == pytest.approx(SOFT_TTL_S + 0.005)
        assert refreshes.args == [10], "one refresh per note while the claim is held"
        assert counting.calls == 0
        assert self.metric(registry, "cache_stale") == BURST
        assert store.redis.pttl(store.keys.refresh(10)) > 0

        assert reader.get(10, seed=7).source == "stale"
        assert refreshes.args == [10], "the claim covers every variant of the note"
        self.coordination_of(store).release_refresh(10)
        assert reader.get(10, seed=0).source == "stale"
        assert refreshes.args == [10, 10], "after release_refresh the next stale read queues again"

    def test_a_snapshot_of_another_configuration_is_served_stale(
        self, store: RedisCache, sqlite: ContextService, make_reader: Callable[..., SnapshotReader],
    ) -> None:
        self.rebuild(sqlite, store, [12])
        other = ContextService(sqlite.store, sqlite.counter, StrategyParams(details_truncate_bytes=20))
        refreshes = Calls()
        served = make_reader(service=other, on_stale=refreshes).get(12, seed=0)
        assert served.source == "stale"
        assert served.body == self.stored_body(store, 12)
        assert refreshes.args == [12]

    # -- miss and burst ---------------------------------------------------------------------------
    def test_a_burst_of_readers_of_a_cold_note_computes_once(
        self, store: RedisCache, sqlite: ContextService, counting: CountingService,
        reader: SnapshotReader, registry: CollectorRegistry,
    ) -> None:
        results = in_parallel(BURST, lambda: reader.get(21, seed=7))
        want = self.live(sqlite, 21, seed=7)
        assert {r.body for r in results} == {want}
        assert counting.calls == 1, "one live computation for the whole burst"
        assert [r.source for r in results].count("live") == 1
        assert self.metric(registry, "live_computes") == 1
        assert self.metric(registry, "lock_waits") > 0
        assert self.metric(registry, "cas_rejections") == 0

        again = reader.get(21, seed=7)
        assert (again.source, again.body) == ("cache", want)
        assert self.stored_body(store, 21, 7) == want
        assert counting.calls == 1
        assert not list(store.redis.scan_iter(match=f"{store.keys.prefix}:lock:*"))
        assert index_mismatches(store) == {}

    def test_a_burst_of_readers_of_an_outdated_snapshot_computes_once_and_never_serves_it(
        self, store: RedisCache, sqlite: ContextService, counting: CountingService,
        reader: SnapshotReader, registry: CollectorRegistry,
    ) -> None:
        self.rebuild(sqlite, store, [21])
        before = self.stored_body(store, 21, 7)
        generation = store.bump_generations([21])[21]  # an event affecting 21 was processed
        results = in_parallel(BURST, lambda: reader.get(21, seed=7))
        assert {r.source for r in results} <= {"live", "cache"}
        assert [r.source for r in results].count("live") == 1
        assert counting.calls == 1, "one live computation for the whole burst"
        assert {r.body for r in results} == {self.live(sqlite, 21, seed=7)} == {before}
        assert self.metric(registry, "cache_outdated") >= 1
        written = snapshot_of(store, 21, "wavefront", 7)
        assert written is not None and written.generation == generation
        assert reader.get(21, seed=7).source == "cache"

    def test_a_miss_writes_the_max_snapshot_and_answers_the_asked_limit(
        self, store: RedisCache, sqlite: ContextService, reader: SnapshotReader
    ) -> None:
        served = reader.get(2, token_limit=300, seed=0)
        assert (served.source, served.age_s) == ("live", 0)
        assert served.body == self.live(sqlite, 2, limit=300)
        env = snapshot_of(store, 2, "wavefront", 0)
        assert env is not None and env.max_token_limit == MAX_LIMIT
        assert orjson.dumps(env.result) == self.live(sqlite, 2)
        assert reader.get(2, seed=0).source == "cache"

    # -- compare-and-set --------------------------------------------------------------------------
    def test_a_live_write_back_never_overwrites_a_newer_generation(
        self, store: RedisCache, sqlite: ContextService, clock: Clock,
        make_reader: Callable[..., SnapshotReader], registry: CollectorRegistry,
    ) -> None:
        newer: dict[str, bytes] = {}

        def edit_and_rebuild_meanwhile() -> None:
            generation = store.bump_generations([12])[12]
            request = Request(12, 0, MAX_LIMIT, NOW_MS, MAX_LIMIT)
            computed = sqlite.compute_many([request], "wavefront")
            outcome = computed.results[request]
            assert not isinstance(outcome, GraphRagError)
            env = Envelope.of(outcome, computed.view, request, strategy="wavefront",
                              generation=generation, computed_at_ms=clock.now_ms - 10,
                              config_hash=config_hash("wavefront", sqlite.params,
                                                      sqlite.counter.name))
            assert store.write_many([env]) == [True]
            newer["bytes"] = env.encode()

        racing = CountingService(sqlite, before=edit_and_rebuild_meanwhile)
        served = make_reader(service=racing).get(12, seed=0)
        assert (served.source, served.body) == ("live", self.live(sqlite, 12))
        assert racing.calls == 1
        assert self.metric(registry, "cas_rejections") == 1
        stored = store.read(SnapshotKey(12, "wavefront", 0))
        assert stored == newer["bytes"], "the older write-back was refused"
        assert index_mismatches(store) == {}
        again = make_reader(service=racing).get(12, seed=0)
        assert again.source == "cache"
        assert again.body == orjson.dumps(orjson.loads(newer["bytes"])["result"])

    # -- TTLs -------------------------------------------------------------------------------------
    def test_every_key_the_reader_writes_has_a_ttl(
        self, store: RedisCache, clock: Clock, make_reader: Callable[..., SnapshotReader]
    ) -> None:
        store.bump_generations([10])  # as an edit event would: the counter exists
        reader = make_reader(on_stale=Calls())
        assert reader.get(10, seed=0).source == "live"
        assert reader.get(21, seed=7, strategy="layered", token_limit=400).source == "live"
        assert reader.get(12, seed=0, strategy="relationship-bfs").source == "live"
        clock.now_ms = READ_AT_MS + SOFT_TTL_S * 1000
        assert reader.get(10, seed=0).source == "stale"
        keys = list(store.redis.scan_iter(match=store.keys.pattern(), count=1000))
        kinds = {key: key.decode()[len(store.keys.prefix) + 1:].split(":")[0] for key in keys}
        # seq: the first live compute found no edit sequence and took a number (current_seq)
        assert set(kinds.values()) == {"snap", "gen", "dep", "shows", "refresh", "seq"}
        hard_ms = HARD_TTL_S * 1000
        for key, kind in kinds.items():
            ttl_ms = store.redis.pttl(key)
            if kind == "seq":
                assert ttl_ms == -1, "the global edit sequence is the one persistent key"
                continue
            assert ttl_ms > 0, key
            if kind == "snap":
                assert hard_ms - 60_000 < ttl_ms <= hard_ms, key
            elif kind in ("gen", "dep", "shows"):
                assert ttl_ms > hard_ms, key
        assert index_mismatches(store) == {}


class TestReaderFakeRedis(OnFakeRedis, ServingContract):
    pass


@pytest.mark.redis
class TestReaderRealRedis(OnRealRedis, ServingContract):
    pass


@pytest.mark.redis
class TestReaderRedisCluster(OnRedisCluster, ServingContract):
    pass
