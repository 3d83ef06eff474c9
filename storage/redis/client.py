"""Building the Redis client, and translating redis-py errors at the seam.

Availability errors (connection refused or lost, timeouts, a read-only replica, out of memory, a
cluster that is down or has a slot uncovered) leave as :class:`~graphrag.core.errors.CacheUnavailable`;
the message names the cause, never a password. The client uses short timeouts and one quick retry:
a reader must fail over to a live compute fast.

On a Redis Cluster (``GRAPHRAG_REDIS_CLUSTER=true``) the client is a ``RedisCluster`` started from any
node's URL. Every multi-key command the adapters send stays within one slot: a note's keys share its
hash tag, a dirty shard's lanes theirs, and reads of many notes' keys go through :func:`mget`, which
sends one MGET per slot on a cluster. Pipelines are never transactional across keys, and scripts go
through ``EVALSHA`` routed by their first key (:func:`evalsha`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.crc import key_slot
from redis.exceptions import (
    ClusterDownError,
    ClusterError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    SlotNotCoveredError,
)
from redis.retry import Retry

from graphrag.core.errors import CacheUnavailable, ConfigurationError
from service.forks import in_forked_child

__all__ = [
    "UNAVAILABLE", "Pinned", "build_client", "delete_prefix", "emulated_client", "evalsha", "is_cluster",
    "mget", "reachable", "translated", "unavailable",
]

#: The redis-py errors that mean "the cache cannot answer now" (retry later, or go live).
UNAVAILABLE: tuple[type[Exception], ...] = (
    redis.ConnectionError, redis.TimeoutError, ReadOnlyError, OutOfMemoryError, ClusterDownError,
    ClusterError, SlotNotCoveredError, RedisClusterException,
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


def build_client(url: str, *, timeout_ms: int = 500, cluster: bool = False) -> Any:
    """A Redis client with short timeouts and one quick retry (``decode_responses=False``); a
    ``RedisCluster`` discovering its nodes from ``url`` when ``cluster``, connecting lazily."""
    timeout_s = timeout_ms / 1000
    retry = Retry(ExponentialBackoff(cap=0.05, base=0.005), retries=1)
    try:
        if cluster:
            return _LazyCluster(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                retry=retry)
        return redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                    retry=retry, health_check_interval=30)
    except ValueError as err:
        raise ConfigurationError(f"GRAPHRAG_REDIS_URL: {err}") from err


_CONNECT_ERRORS: tuple[type[Exception], ...] = (*UNAVAILABLE, redis.RedisError)


class _LazyCluster:
    """A ``RedisCluster`` made at its first use: redis-py's constructor already asks the cluster for
    its slots, and a process must be able to start (and compute live) while the cluster is down."""

    def __init__(self, url: str, **options: Any) -> None:
        self._url, self._options = url, options
        self._client: RedisCluster | None = None

    def _real(self) -> RedisCluster:
        if self._client is None:
            try:
                self._client = RedisCluster.from_url(self._url, **self._options)
            except _CONNECT_ERRORS as err:  # e.g. "Redis Cluster cannot be connected"
                raise unavailable(err) from err
        return self._client

    def register_script(self, script: str) -> Script:
        """A script object (its SHA computed here from the bytes) without asking the cluster anything
        yet."""
        return Script(self, script.encode())  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)


class Pinned:
    """A client on ``client``'s pool that holds one connection of its own for all its commands
    (redis-py's single-connection client, under its lock), rather than taking one from the pool
    and giving it back at each: the checks of both cost a cache hit over HTTP about a twentieth of
    its time. Made at the first command, so that a Redis that is down at a start fails a
    command, not the start; made again in a forked child, whose parent's connection it must not
    share. ``client`` is a plain ``redis.Redis`` (a cluster's client holds a connection per node)."""

    def __init__(self, client: Any) -> None:
        self._pool: Any = client.connection_pool
        self._held: Any = None
        self._lock = threading.Lock()
        in_forked_child(self._forked)

    def client(self) -> Any:
        """The client holding the connection (connecting raises redis-py's errors)."""
        held = self._held
        if held is None:
            with self._lock:
                if self._held is None:
                    self._held = redis.Redis(connection_pool=self._pool, single_connection_client=True)
                held = self._held
        return held

    def _forked(self) -> None:
        self._held, self._lock = None, threading.Lock()


def is_cluster(client: Any) -> bool:
    """Whether ``client`` talks to a Redis Cluster (also through a wrapper that forwards to one)."""
    return isinstance(client, RedisCluster | _LazyCluster) or callable(getattr(client, "keyslot", None))


def mget(client: Any, keys: Sequence[str | bytes], *, chunk: int = 500) -> list[Any]:
    """``MGET keys`` in key order, in one pipelined round of MGETs of at most ``chunk`` keys; on a
    cluster (which refuses an MGET spanning slots) each MGET holds the keys of one slot."""
    if not keys:
        return []
    groups: dict[int, list[int]] = {}
    if is_cluster(client):
        for at, key in enumerate(keys):
            groups.setdefault(key_slot(key if isinstance(key, bytes) else key.encode()), []).append(at)
    else:
        groups[0] = list(range(len(keys)))
    parts = [members[at : at + chunk] for members in groups.values()
             for at in range(0, len(members), chunk)]
    pipe = client.pipeline(transaction=False)
    for part in parts:
        pipe.execute_command("MGET", *(keys[at] for at in part))
    out: list[Any] = [None] * len(keys)
    for part, reply in zip(parts, pipe.execute(), strict=True):
        for at, value in zip(part, reply, strict=True):
            out[at] = value
    return out


def evalsha(target: Any, sha: str, keys: Sequence[str | bytes], *args: Any) -> Any:
    """``EVALSHA sha len(keys) *keys *args`` on ``target`` (a client or a pipeline of one).

    On a cluster the command goes to the node serving the first key's slot, which this function
    names itself (``target_nodes``): redis-py 8 otherwise asks a server ``COMMAND GETKEYS`` for every
    script call (EVALSHA has "movable keys"), one extra round trip each, which halved the rebuild
    rate on a cluster. If a slot has moved meanwhile, the node answers MOVED and the pipeline resends
    that one command on its own, routed by redis-py from its keys (the adapters call this on
    pipelines only).
    """
    if is_cluster(target) and keys:
        return target.execute_command("EVALSHA", sha, len(keys), *keys, *args,
                                      target_nodes=target.get_node_from_key(keys[0]))
    return target.execute_command("EVALSHA", sha, len(keys), *keys, *args)


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
