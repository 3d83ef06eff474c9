"""What the cache Redis says about itself (``INFO server`` and ``INFO memory``), for the doctor.

On a Redis Cluster every primary answers for itself: the lowest version, the smallest
``maxmemory`` and the first policy that is not the expected one are the ones that matter (the
first node to refuse or to evict). Unavailability leaves as CacheUnavailable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis.cluster import RedisCluster

from storage.redis.client import is_cluster, translated

__all__ = ["ServerFacts", "server_facts"]


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """``redis_version``, ``maxmemory`` (0: no limit) and ``maxmemory_policy``."""

    version: tuple[int, ...]
    max_bytes: int
    policy: str

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))


def server_facts(client: Any) -> ServerFacts:
    with translated():
        if is_cluster(client):
            replies = client.info(target_nodes=RedisCluster.PRIMARIES)
            infos = [v for v in replies.values() if isinstance(v, Mapping)] or [replies]
        else:
            infos = [client.info()]
    facts = [_facts(info) for info in infos]
    limited = [f.max_bytes for f in facts if f.max_bytes] or [0]
    return ServerFacts(min(f.version for f in facts), min(limited),
                       next((f.policy for f in facts if f.policy != facts[0].policy), facts[0].policy))


def _facts(info: Mapping[str, Any]) -> ServerFacts:
    version = tuple(int(part) for part in str(info.get("redis_version", "0")).split(".")
                    if part.isdigit())
    return ServerFacts(version, int(info.get("maxmemory", 0)), str(info.get("maxmemory_policy", "")))
