"""The cache Redis's memory against its limit (``INFO memory``), for the workers' metrics.

On a Redis Cluster every primary has its own ``maxmemory``; the one nearest its limit is reported,
since it is the first to evict. A server without a limit reports ``maxmemory`` 0. Unavailability
leaves as :class:`~graphrag.core.errors.CacheUnavailable`, like every adapter's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from redis.cluster import RedisCluster

from service.state_metrics import MemoryUse
from storage.redis.client import is_cluster, translated

__all__ = ["memory_use"]


def memory_use(client: Any) -> MemoryUse:
    """``used_memory`` and ``maxmemory`` of the server (of the fullest primary on a cluster)."""
    with translated():
        if is_cluster(client):
            replies = client.info("memory", target_nodes=RedisCluster.PRIMARIES)
            return _fullest(_node_infos(replies))
        return _use(client.info("memory"))


def _node_infos(replies: Mapping[Any, Any]) -> list[Mapping[str, Any]]:
    """One INFO dict per node, whether redis-py answered per node or merged for a single one."""
    if replies and all(isinstance(v, Mapping) for v in replies.values()):
        return list(replies.values())
    return [replies]


def _fullest(infos: Iterable[Mapping[str, Any]]) -> MemoryUse:
    uses = [_use(info) for info in infos]
    return max(uses, key=lambda u: u.used_bytes / u.max_bytes if u.max_bytes else 0.0)


def _use(info: Mapping[str, Any]) -> MemoryUse:
    return MemoryUse(int(info.get("used_memory", 0)), int(info.get("maxmemory", 0)))
