"""Expiring locks, flags and claims in Redis (:class:`service.ports.Coordination`).

Locks are redis-py's :class:`redis.lock.Lock` (a token in a key with a TTL, released by a script only
by its holder), wrapped in :class:`RedisLease` so no redis-py type or exception leaves: acquiring
against an unreachable Redis raises ``CacheUnavailable``; renewing or releasing a lease that expired
or whose Redis is gone just reports it (a lease always frees itself at its TTL). Flags and claims
are ``SET NX PX`` keys that expire by themselves.
"""

from __future__ import annotations

import contextlib
from typing import Any

from redis.exceptions import LockError, RedisError

from service.envelope import SnapshotKey
from storage.redis.client import UNAVAILABLE, translated, unavailable
from storage.redis.keys import Keys

__all__ = ["RedisCoordination", "RedisLease"]

_POLL_S = 0.005  # how often a waiter retries a held lock


class RedisLease:
    """One lock; thread-agnostic (a keeper thread may renew what its owner took)."""

    def __init__(self, client: Any, name: str, ttl_ms: int) -> None:
        self._lock = client.lock(name, timeout=ttl_ms / 1000, sleep=_POLL_S, thread_local=False)

    def acquire(self, *, wait_ms: int = 0) -> bool:
        try:
            if wait_ms <= 0:
                return bool(self._lock.acquire(blocking=False))
            return bool(self._lock.acquire(blocking_timeout=wait_ms / 1000))
        except UNAVAILABLE as err:
            raise unavailable(err) from err
        except RedisError as err:
            raise unavailable(err) from err

    def renew(self) -> bool:
        try:
            self._lock.reacquire()
        except (LockError, RedisError):
            return False
        return True

    def release(self) -> None:
        # expired, taken over, or Redis gone: it frees itself at its TTL either way
        with contextlib.suppress(LockError, RedisError):
            self._lock.release()


class RedisCoordination:
    """Locks, flags and claims under one key prefix."""

    def __init__(self, client: Any, keys: Keys) -> None:
        self.redis, self.keys = client, keys

    def lock(self, name: str, *, ttl_ms: int) -> RedisLease:
        return RedisLease(self.redis, self.keys.flag(f"lock:{name}"), ttl_ms)

    def snapshot_lock(self, key: SnapshotKey, *, ttl_ms: int) -> RedisLease:
        name = self.keys.lock(key.note_id, key.strategy, key.seed, key.token_limit)
        return RedisLease(self.redis, name, ttl_ms)

    def _set_once(self, name: str, **expiry: int) -> bool:
        with translated():
            return bool(self.redis.set(name, b"1", nx=True, **expiry))

    def _delete(self, name: str) -> None:
        with translated():
            self.redis.delete(name)

    def claim_flag(self, name: str, *, ttl_ms: int) -> bool:
        return self._set_once(self.keys.flag(name), px=ttl_ms)

    def clear_flag(self, name: str) -> None:
        self._delete(self.keys.flag(name))

    def claim_refresh(self, note_id: int, *, ttl_s: int) -> bool:
        return self._set_once(self.keys.refresh(note_id), ex=ttl_s)

    def release_refresh(self, note_id: int) -> None:
        self._delete(self.keys.refresh(note_id))

    def claim_delivery(self, token: str, *, ttl_s: int) -> bool:
        return self._set_once(self.keys.webhook(token), ex=ttl_s)

    def seen_delivery(self, token: str) -> bool:
        with translated():
            return bool(self.redis.exists(self.keys.webhook(token)))
