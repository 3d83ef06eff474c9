"""The cache Redis's memory against its limit (storage.redis.memory), as the workers' metrics read
it: from the real Redis, from the shared local Redis Cluster (the primary nearest its limit), and as
CacheUnavailable when nothing answers."""

from __future__ import annotations

import pytest
from redis.cluster import RedisCluster

from graphrag.core.errors import CacheUnavailable
from storage.redis.client import build_client
from storage.redis.memory import memory_use
from tests.redis.readers import real_redis, unique_prefix, unreachable_redis
from tests.services.redis_cluster import shared_cluster

pytestmark = pytest.mark.redis


def test_a_single_redis_reports_its_used_memory_and_its_limit() -> None:
    with real_redis(unique_prefix()) as client:
        use = memory_use(client)
        info = client.info("memory")
        assert use.used_bytes > 0 and use.max_bytes == int(info["maxmemory"])


#: how far a primary's used memory may move between two reads of it: other tests share the
#: cluster and write to it meanwhile, so an exact match would race them
_DRIFT_BYTES = 1 << 20


def test_a_cluster_reports_the_primary_nearest_its_limit() -> None:
    client = build_client(shared_cluster().startup_url, timeout_ms=2_000, cluster=True)
    primaries = client.info("memory", target_nodes=RedisCluster.PRIMARIES)
    use = memory_use(client)
    assert any(abs(int(info["used_memory"]) - use.used_bytes) <= _DRIFT_BYTES
               and int(info["maxmemory"]) == use.max_bytes for info in primaries.values())


def test_an_unreachable_redis_is_cache_unavailable() -> None:
    with pytest.raises(CacheUnavailable):
        memory_use(unreachable_redis())
