"""Building the Redis client, and translating redis-py errors at the seam.

Availability errors (connection refused or lost, timeouts, a read-only replica, out of memory)
leave as :class:`~graphrag.errors.CacheUnavailable`; the message names the cause, never a password.
The client uses short timeouts and one quick retry: a reader must fail over to a live compute fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import OutOfMemoryError, ReadOnlyError
from redis.retry import Retry

from graphrag.errors import CacheUnavailable, ConfigurationError

__all__ = [
    "UNAVAILABLE", "build_client", "delete_prefix", "emulated_client", "reachable", "translated",
    "unavailable",
]

#: The redis-py errors that mean "the cache cannot answer now" (retry later, or go live).
UNAVAILABLE: tuple[type[Exception], ...] = (
    redis.ConnectionError, redis.TimeoutError, ReadOnlyError, OutOfMemoryError,
)


def unavailable(err: Exception) -> CacheUnavailable:
    return CacheUnavailable(f"redis unavailable: {err.__class__.__name__}: {err}")


@contextmanager
def translated() -> Iterator[None]:
    """Translate redis-py availability errors into :class:`CacheUnavailable`."""
    try:
        yield
    except UNAVAILABLE as err:
        raise unavailable(err) from err


def build_client(url: str, *, timeout_ms: int = 500) -> Any:
    """A Redis client with short timeouts and one quick retry (``decode_responses=False``)."""
    timeout_s = timeout_ms / 1000
    try:
        return redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
            retry=Retry(ExponentialBackoff(cap=0.05, base=0.005), retries=1),
            health_check_interval=30,
        )
    except ValueError as err:
        raise ConfigurationError(f"GRAPHRAG_REDIS_URL: {err}") from err


def reachable(client: Any) -> bool:
    """Whether the client's Redis answers PING now."""
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def delete_prefix(client: Any, prefix: str) -> int:
    """Delete every key under ``<prefix>:`` (demos and tests clean up after themselves)."""
    count = 0
    with translated():
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            count += int(client.delete(key))
    return count


def emulated_client() -> Any:
    """An in-process Redis emulation (fakeredis, with Lua) for a demo with no Redis to talk to."""
    import fakeredis

    return fakeredis.FakeRedis()
