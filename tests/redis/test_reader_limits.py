"""The reader on the Redis adapters (fakeredis, the real Redis, a local Redis Cluster), continued:
what a tokenLimit, a strategy and a seed select. A smaller tokenLimit is a prefix slice of the stored
snapshot equal to a live compute byte for byte; layered snapshots are kept per configured limit and
other limits are computed live; a limit above the maximum is computed live and never written; and no
seed picks one of the configured seeds.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import orjson
import pytest

from service.context import ContextService
from service.envelope import Envelope, SnapshotKey
from service.reader import SnapshotReader
from storage.redis.cache import RedisCache
from tests.redis.reader_contract import (
    LAYERED_LIMITS,
    MAX_LIMIT,
    SEEDS,
    OnFakeRedis,
    OnRealRedis,
    OnRedisCluster,
    ReaderContract,
)
from tests.redis.readers import CountingService, snapshot_of
from tests.support import NOW_MS

FOCI = (1, 2, 10, 12, 21, 33)


def small_limits(env: Envelope) -> list[int]:
    """tokenLimits below the snapshot's: at its start, around its middle and at its end."""
    ends = [env.focus_tokens]
    for cost in env.related_tokens:
        ends.append(ends[-1] + cost)
    middle = ends[len(ends) // 2]
    return sorted({1, env.focus_tokens, middle - 1, middle, middle + 1, ends[-1] - 1, ends[-1]}
                  - {env.max_token_limit})


class LimitsContract(ReaderContract):
    """Prefix slicing, layered limits, limits above the maximum, seeds."""

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


class TestReaderFakeRedis(OnFakeRedis, LimitsContract):
    pass


@pytest.mark.redis
class TestReaderRealRedis(OnRealRedis, LimitsContract):
    pass


@pytest.mark.redis
class TestReaderRedisCluster(OnRedisCluster, LimitsContract):
    pass
