"""What the modules of the reader contract (:class:`service.reader.SnapshotReader` on the Redis
adapters) share: its base class, with the fixtures (an isolated Redis under a fresh key prefix, the
notes in SQLite behind a counting service, a settable clock, metrics, a reader factory) and helpers
(a rebuild, a live compute, a stored body), and one mixin per Redis giving the contract its client:
fakeredis, the real Redis, the test process's local Redis Cluster.

The real Redis is ``GRAPHRAG_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); when it cannot
be reached the tests fail (never skip). Each test works under its own key prefix and deletes its keys
afterwards. The notes live in a SQLite file built from :func:`tests.redis.readers.reader_graph`; the
reader's clock is a settable :class:`~tests.redis.readers.Clock`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from prometheus_client import CollectorRegistry

from graphrag import Request
from service.context import ContextService
from service.metrics import ReaderMetrics
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import rebuild
from storage.redis.cache import RedisCache
from storage.redis.client import delete_prefix
from storage.redis.coordination import RedisCoordination
from tests.contracts.backends import cluster_client
from tests.redis.readers import (
    Clock,
    CountingService,
    fake_redis,
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
BURST = 50
#: how long a burst's waiters wait for the one computing (the default 3 s is for production)
LOCK_WAIT_MS = 60_000
#: The reader's clock in most tests: one second after the snapshots were rebuilt.
READ_AT_MS = NOW_MS + 1_000


class ReaderContract:
    """The base of every reader contract; a test class mixes in one of the ``On*`` classes below,
    which provide ``client`` (an isolated Redis) and ``unreachable``."""

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
            # waiters wait as long as a slow machine may need: a burst asserts one computation
            config = ReaderConfig(strategies=STRATEGIES, seeds=seeds, max_token_limit=MAX_LIMIT,
                                  layered_limits=LAYERED_LIMITS, lock_wait_ms=LOCK_WAIT_MS)
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


class OnFakeRedis:
    """The client: fakeredis, on a server of its own."""

    @pytest.fixture
    def client(self, prefix: str) -> Iterator[redis.Redis]:
        yield fake_redis()

    def unreachable(self) -> redis.Redis:
        return fake_redis(connected=False)


class OnRealRedis:
    """The client: the real Redis."""

    @pytest.fixture
    def client(self, prefix: str) -> Iterator[redis.Redis]:
        with real_redis(prefix, max_connections=2 * BURST) as client:
            yield client

    def unreachable(self) -> redis.Redis:
        return unreachable_redis()


class OnRedisCluster:
    """The client: the test process's local 3-primary Redis Cluster."""

    @pytest.fixture
    def client(self, prefix: str) -> Iterator[redis.Redis]:
        with cluster_client() as client:
            yield client
            delete_prefix(client, prefix)

    def unreachable(self) -> redis.Redis:
        with cluster_client(connected=False) as client:
            return client  # type: ignore[no-any-return]
