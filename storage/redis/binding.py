"""The database a key prefix belongs to (:class:`service.binding.PrefixBinding`), in Redis.

One string key without a TTL, ``<prefix>:binding``, holding the identity's JSON (digest and
description): the cache's eviction policy (``volatile-lru``) never evicts it, and a flush removes it
with the snapshots it vouched for. :meth:`RedisBinding.bind` is a ``SET NX``, so of two processes
of two databases starting at once, one binds and the other is refused. A take-over deletes every
key under the prefix but the scheduler's (``<prefix>:redbeat...``, which belongs to no database),
on every primary of a cluster, then writes the new binding.
"""

from __future__ import annotations

from typing import Any

from service.binding import DatabaseIdentity
from storage.redis.client import translated
from storage.redis.keys import Keys

__all__ = ["RedisBinding"]


class RedisBinding:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.redis, self.keys, self.prefix = client, keys, keys.prefix

    def bound(self) -> DatabaseIdentity | None:
        with translated():
            raw = self.redis.get(self.keys.binding())
        return None if raw is None else DatabaseIdentity.from_bytes(bytes(raw))

    def bind(self, identity: DatabaseIdentity) -> DatabaseIdentity:
        with translated():
            if self.redis.set(self.keys.binding(), identity.to_bytes(), nx=True):
                return identity
        return self.bound() or identity  # unreadable: the next start binds it again

    def clear_and_bind(self, identity: DatabaseIdentity) -> int:
        kept = f"{self.prefix}:redbeat"
        deleted = 0
        with translated():
            for key in self.redis.scan_iter(match=self.keys.pattern(), count=1000):
                if not bytes(key).decode(errors="replace").startswith(kept):
                    deleted += int(self.redis.delete(key))
            self.redis.set(self.keys.binding(), identity.to_bytes())
        return deleted
