"""The reader (:class:`service.reader.SnapshotReader`) on the Redis adapters: fakeredis, real Redis.

The real Redis is ``GRAPHRAG_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); when it cannot
be reached the tests fail (never skip). Each test works under its own key prefix and deletes its keys
afterwards. The notes live in a SQLite file built from :func:`tests.redis.readers.reader_graph`; the
reader's clock is a settable :class:`~tests.redis.readers.Clock`.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from prometheus_client import CollectorRegistry

from graphrag import (
    GraphRagError,
    InvalidParameter,
    NoteNotFound,
    Request,
    StrategyParams,
    config_hash,
)
from graphrag.core.errors import Unavailable
from service.context import ContextService
from service.envelope import Envelope, SnapshotKey, decode_envelope
from service.metrics import ReaderMetrics
from service.reader import ReaderConfig, Served, SnapshotReader
from service.rebuild import rebuild
from storage.redis.cache import RedisCache
from storage.redis.client import delete_prefix
from storage.redis.coordination import RedisCoordination
from tests.contracts.backends import cluster_client
from tests.redis.readers import (
    DELETED_LINK,
    DELETED_NOTE,
    UNKNOWN_NOTE,
    Calls,
    Clock,
    CountingRedis,
    CountingService,
    SqlCounter,
    down_service,
    fake_redis,
    index_mismatches,
    real_redis,
    snapshot_of,
    sqlite_service,
    unique_prefix,
    unreachable_redis,
)
from tests.support import NOW_MS

SOFT_TTL_S, HARD_TTL_S = 3_600, 7_200
MAX_LIMIT = 1_000  # below the biggest contexts of the graph, so the max snapshot is itself a cut
LAYERED_LIMITS = (400, 1_000)
SEEDS = (0, 7)
STRATEGIES = ("wavefront", "relationship-bfs", "layered")
FOCI = (1, 2, 10, 12, 21, 33)
BURST = 50
#: The reader's clock in most tests: one second after the snapshots were rebuilt.
READ_AT_MS = NOW_MS + 1_000
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


def small_limits(env: Envelope) -> list[int]:
    """tokenLimits below the snapshot's: at its start, around its middle and at its end."""
    ends = [env.focus_tokens]
    for cost in env.related_tokens:
        ends.append(ends[-1] + cost)
    middle = ends[len(ends) // 2]
    return sorted({1, env.focus_tokens, middle - 1, middle, middle + 1, ends[-1] - 1, ends[-1]}
                  - {env.max_token_limit})


class ReaderContract:
    """The contract; subclasses provide ``client`` (an isolated Redis) and ``unreachable``."""

    @pytest.fixture
    def prefix(self) -> str:
        return unique_prefix()

    @pytest.fixture
    def client(self, prefix: str) -> Iterator[redis.Redis]:
        raise NotImplementedError

    def unreachable(self) -> redis.Redis:
        raise NotImplementedError

    @pytest.fixture
    def sqlite(self, tmp_path: Path) -> Iterator[ContextService]:
        with sqlite_service(tmp_path) as service:
            yield service

    @pytest.fixture
    def counting(self, sqlite: ContextService) -> CountingService:
        return CountingService(sqlite)

    @pytest.fixture
    def store(self, client: redis.Redis, prefix: str) -> RedisCache:
        return self.store_on(client, prefix)

    @staticmethod
    def store_on(client: Any, prefix: str) -> RedisCache:
        return RedisCache(client, prefix=prefix, soft_ttl_s=SOFT_TTL_S, hard_ttl_s=HARD_TTL_S)

    @staticmethod
    def coordination_of(store: RedisCache) -> RedisCoordination:
        return RedisCoordination(store.redis, store.keys)

    @pytest.fixture
    def clock(self) -> Clock:
        return Clock(READ_AT_MS)

    @pytest.fixture
    def registry(self) -> CollectorRegistry:
        return CollectorRegistry()

    @pytest.fixture
    def metrics(self, registry: CollectorRegistry) -> ReaderMetrics:
        return ReaderMetrics.create(registry)

    @pytest.fixture
    def make_reader(
        self, counting: CountingService, store: RedisCache, clock: Clock, metrics: ReaderMetrics
    ) -> Callable[..., SnapshotReader]:
        """A reader factory (all its readers share one set of metrics); by default on the counting
        SQLite service and the test's store."""

        def make(*, service: ContextService | None = None, store_: RedisCache | None = None,
                 on_stale: Callable[[int], None] | None = None, seeds: tuple[int, ...] = SEEDS,
                 rng: random.Random | None = None) -> SnapshotReader:
            config = ReaderConfig(strategies=STRATEGIES, seeds=seeds, max_token_limit=MAX_LIMIT,
                                  layered_limits=LAYERED_LIMITS)
            cache = store_ or store
            return SnapshotReader(service or counting, cache, self.coordination_of(cache), config,
                                  metrics=metrics, on_stale=on_stale, clock_ms=clock, rng=rng)

        return make

    @pytest.fixture
    def reader(self, make_reader: Callable[..., SnapshotReader]) -> SnapshotReader:
        return make_reader()

    # -- helpers ----------------------------------------------------------------------------------
    @staticmethod
    def metric(registry: CollectorRegistry, name: str) -> float:
        return registry.get_sample_value(f"graphrag_{name}_total") or 0.0

    @staticmethod
    def rebuild(service: ContextService, store: RedisCache, foci: tuple[int, ...] | list[int],
                seeds: tuple[int, ...] = SEEDS) -> None:
        report = rebuild(service, store, foci, strategies=STRATEGIES, seeds=seeds,
                         max_token_limit=MAX_LIMIT, layered_limits=LAYERED_LIMITS, now_ms=NOW_MS)
        assert report.errors == {} and report.rejected == 0 and report.deleted == frozenset()
        assert report.count == len(foci) * len(seeds) * (len(STRATEGIES) - 1 + len(LAYERED_LIMITS))

    @staticmethod
    def live(service: ContextService, focus: int, *, seed: int = 0, limit: int = MAX_LIMIT,
             now_ms: int = READ_AT_MS, strategy: str = "wavefront",
             traversal: int | None = MAX_LIMIT) -> bytes:
        """What a live compute answers (the reader sizes the traversal for the max tokenLimit)."""
        traversal = None if traversal is None else max(traversal, limit)
        return service.compute(Request(focus, seed, limit, now_ms, traversal), strategy).to_json()

    @staticmethod
    def stored_body(store: RedisCache, focus: int, seed: int = 0, strategy: str = "wavefront",
                    limit: int | None = None) -> bytes:
        env = snapshot_of(store, focus, strategy, seed, limit)
        assert env is not None, (focus, seed, strategy, limit)
        return orjson.dumps(env.result)

    @staticmethod
    def snapshot_keys(store: RedisCache) -> set[bytes]:
        return set(store.redis.scan_iter(match=f"{store.keys.prefix}:snap:*", count=1000))

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

    # -- prefix slicing ---------------------------------------------------------------------------
    @pytest.mark.parametrize("strategy", ["wavefront", "relationship-bfs"])
    def test_smaller_token_limits_equal_a_live_compute_byte_for_byte(
        self, strategy: str, store: RedisCache, sqlite: ContextService, counting: CountingService,
        reader: SnapshotReader,
    ) -> None:
        self.rebuild(sqlite, store, FOCI)
        cut_something = False
        for focus in FOCI:
            for seed in SEEDS:
                env = snapshot_of(store, focus, strategy, seed)
                assert env is not None
                for small in small_limits(env):
                    served = reader.get(focus, token_limit=small, seed=seed, strategy=strategy)
                    assert served.source == "cache"
                    want = self.live(sqlite, focus, seed=seed, limit=small, now_ms=env.as_of_ms,
                                     strategy=strategy)
                    assert served.body == want, (focus, seed, small)
                    cut = len(orjson.loads(served.body)["relatedNotes"])
                    cut_something |= 0 < cut < len(env.result["relatedNotes"])
                full = reader.get(focus, token_limit=MAX_LIMIT, seed=seed, strategy=strategy)
                assert full.body == orjson.dumps(env.result)
        assert cut_something
        assert counting.calls == 0

    def test_layered_snapshots_are_per_configured_limit_and_others_are_live(
        self, store: RedisCache, sqlite: ContextService, counting: CountingService,
        reader: SnapshotReader,
    ) -> None:
        self.rebuild(sqlite, store, [10, 21])
        keys = self.snapshot_keys(store)
        bodies = set()
        for limit in LAYERED_LIMITS:
            served = reader.get(10, token_limit=limit, seed=7, strategy="layered")
            assert served.source == "cache"
            assert served.body == self.live(sqlite, 10, seed=7, limit=limit, now_ms=NOW_MS,
                                            strategy="layered", traversal=None)
            bodies.add(served.body)
        assert len(bodies) == len(LAYERED_LIMITS), "the layered limits give different results"
        assert counting.calls == 0
        for limit in (300, 700):
            served = reader.get(10, token_limit=limit, seed=7, strategy="layered")
            assert served.source == "live"
            assert served.body == self.live(sqlite, 10, seed=7, limit=limit, strategy="layered")
        assert counting.calls == 2
        assert self.snapshot_keys(store) == keys, "an unconfigured layered limit is never stored"

    # -- beyond the maximum, seeds ----------------------------------------------------------------
    def test_a_token_limit_above_the_maximum_is_computed_live_and_not_written(
        self, store: RedisCache, sqlite: ContextService, counting: CountingService,
        reader: SnapshotReader,
    ) -> None:
        self.rebuild(sqlite, store, [10])
        before = store.read(SnapshotKey(10, "wavefront", 0))
        big = 3 * MAX_LIMIT
        served = reader.get(10, token_limit=big, seed=0)
        assert served.source == "live"
        assert served.body == self.live(sqlite, 10, limit=big)
        assert len(orjson.loads(served.body)["relatedNotes"]) > len(orjson.loads(before or b"")["result"]
                                                                    ["relatedNotes"])
        assert store.read(SnapshotKey(10, "wavefront", 0)) == before
        cold = reader.get(21, token_limit=big, seed=0)
        assert cold.source == "live" and cold.body == self.live(sqlite, 21, limit=big)
        assert store.read(SnapshotKey(21, "wavefront", 0)) is None
        assert not [k for k in store.redis.scan_iter(match=f"{store.keys.prefix}:*")
                    if b"{21}" in k and not k.startswith(store.keys.dep(21).encode())]
        assert counting.calls == 2

    def test_no_seed_picks_one_of_the_configured_seeds(
        self, store: RedisCache, sqlite: ContextService, make_reader: Callable[..., SnapshotReader]
    ) -> None:
        self.rebuild(sqlite, store, [10])
        per_seed = {seed: self.stored_body(store, 10, seed) for seed in SEEDS}
        assert len(set(per_seed.values())) == len(SEEDS)
        reader = make_reader(rng=random.Random(1234))
        seen = [reader.get(10) for _ in range(24)]
        assert {s.source for s in seen} == {"cache"}
        assert {s.body for s in seen} == set(per_seed.values()), "every configured seed gets picked"
        only = make_reader(seeds=(7,)).get(10)
        assert only.body == per_seed[7]

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

    # -- bad input --------------------------------------------------------------------------------
    @pytest.mark.parametrize(("args", "parameter"), [
        ({"note_id": -1}, "noteId"),
        ({"note_id": "10"}, "noteId"),
        ({"note_id": 1.5}, "noteId"),
        ({"note_id": True}, "noteId"),
        ({"note_id": None}, "noteId"),
        ({"token_limit": 0}, "tokenLimit"),
        ({"token_limit": -1}, "tokenLimit"),
        ({"token_limit": 10**9}, "tokenLimit"),
        ({"token_limit": 2.5}, "tokenLimit"),
        ({"token_limit": "300"}, "tokenLimit"),
        ({"token_limit": True}, "tokenLimit"),
        ({"strategy": "nope"}, "strategy"),
        ({"strategy": ""}, "strategy"),
        ({"strategy": "Wavefront"}, "strategy"),
        ({"seed": 99}, "seed"),
        ({"seed": -1}, "seed"),
        ({"seed": "0"}, "seed"),
    ])
    def test_bad_input_names_the_parameter(
        self, args: dict[str, Any], parameter: str, store: RedisCache, counting: CountingService,
        reader: SnapshotReader,
    ) -> None:
        call: dict[str, Any] = {"note_id": 10, **args}
        note_id = call.pop("note_id")
        with pytest.raises(InvalidParameter) as caught:
            reader.get(note_id, **call)
        assert caught.value.parameter == parameter
        assert counting.calls == 0
        assert not list(store.redis.scan_iter(match=f"{store.keys.prefix}:*"))

    @pytest.mark.parametrize("seed", [0.0, False])
    def test_a_seed_that_is_not_an_int_is_invalid(
        self, seed: Any, store: RedisCache, reader: SnapshotReader
    ) -> None:
        with pytest.raises(InvalidParameter) as caught:
            reader.get(10, seed=seed)
        assert caught.value.parameter == "seed"

    @pytest.mark.parametrize("note_id", [UNKNOWN_NOTE, DELETED_NOTE, DELETED_LINK])
    def test_unknown_and_deleted_notes_are_not_found(
        self, note_id: int, store: RedisCache, reader: SnapshotReader
    ) -> None:
        for strategy in STRATEGIES:
            with pytest.raises(NoteNotFound):
                reader.get(note_id, strategy=strategy, seed=0)
        with pytest.raises(NoteNotFound):
            reader.get(note_id, token_limit=5 * MAX_LIMIT)
        assert not self.snapshot_keys(store)
        assert not list(store.redis.scan_iter(match=f"{store.keys.prefix}:lock:*"))

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


class TestReaderFakeRedis(ReaderContract):
    @pytest.fixture
    def client(self, prefix: str) -> Iterator[redis.Redis]:
        yield fake_redis()

    def unreachable(self) -> redis.Redis:
        return fake_redis(connected=False)


@pytest.mark.redis
class TestReaderRealRedis(ReaderContract):
    @pytest.fixture
    def client(self, prefix: str) -> Iterator[redis.Redis]:
        with real_redis(prefix, max_connections=2 * BURST) as client:
            yield client

    def unreachable(self) -> redis.Redis:
        return unreachable_redis()


@pytest.mark.redis
class TestReaderRedisCluster(ReaderContract):
    """The same contract on the test process's local 3-primary Redis Cluster."""

    @pytest.fixture
    def client(self, prefix: str) -> Iterator[redis.Redis]:
        with cluster_client() as client:
            yield client
            delete_prefix(client, prefix)

    def unreachable(self) -> redis.Redis:
        with cluster_client(connected=False) as client:
            return client  # type: ignore[no-any-return]
