"""Latency of the local Redis Cluster against the single Redis: ``python -m tests.services.measure``.

Two figures, each for both deployments, on bytes clients like the service's:

* the p50 of one ``GET`` round trip (``rounds`` sequential GETs of one existing key);
* the median time of one non-transactional pipeline of ``commands`` GETs of keys spread over many
  slots (``<prefix>:k:{i}``: on the cluster they fan out to every primary).

The single Redis is ``GRAPHRAG_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); keys live
under a fresh prefix and are deleted afterwards. Figures depend on the machine: compare the pair.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.cluster import RedisCluster

from tests.services.redis_cluster import redis_cluster

__all__ = ["Figures", "get_p50_us", "measure", "pipeline_ms"]

REDIS_URL_ENV = "GRAPHRAG_TEST_REDIS_URL"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True, slots=True)
class Figures:
    get_p50_us: float
    pipeline_ms: float


def get_p50_us(client: redis.Redis | RedisCluster, key: str, rounds: int = 2000) -> float:
    """Median microseconds of one GET round trip of ``key`` (which must exist)."""
    client.set(key, b"x" * 100)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        client.get(key)
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def pipeline_ms(client: redis.Redis | RedisCluster, prefix: str, commands: int = 1000,
                repeats: int = 7) -> float:
    """Median milliseconds of one pipeline of ``commands`` GETs over ``commands`` hash tags."""
    keys = [f"{prefix}:k:{{{i}}}" for i in range(commands)]
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.set(key, key.encode())
        pipe.execute()
    times = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.get(key)
            replies = pipe.execute()
        times.append(time.perf_counter_ns() - start)
        if replies != [key.encode() for key in keys]:
            raise AssertionError("a pipelined GET returned another key's value")
    return statistics.median(times) / 1e6


def measure(client: redis.Redis | RedisCluster, prefix: str) -> Figures:
    """Both figures on ``client`` under ``prefix`` (keys left for the caller to delete)."""
    return Figures(get_p50_us(client, f"{prefix}:one"), pipeline_ms(client, prefix))


def _delete_prefix(client: redis.Redis | RedisCluster, prefix: str) -> None:
    for key in list(client.scan_iter(match=f"{prefix}:*", count=1000)):
        client.delete(key)


def main() -> int:
    prefix = f"measure:{uuid.uuid4().hex[:8]}"
    single = redis.Redis.from_url(os.environ.get(REDIS_URL_ENV, "").strip() or DEFAULT_REDIS_URL)
    with tempfile.TemporaryDirectory() as tmp, redis_cluster(Path(tmp)) as info:
        cluster = RedisCluster.from_url(info.startup_url)
        try:
            rows = {"single": measure(single, prefix), "cluster": measure(cluster, prefix)}
        finally:
            _delete_prefix(single, prefix)
            cluster.close()
    print(f"{'':8} {'GET p50 (us)':>14} {'1000-GET pipeline (ms)':>24}")
    for name, fig in rows.items():
        print(f"{name:8} {fig.get_p50_us:14.1f} {fig.pipeline_ms:24.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
