"""The database an in-memory cache belongs to (:class:`service.binding.PrefixBinding`): the fast
twin of :class:`storage.redis.binding.RedisBinding`, over one :class:`storage.memory.MemoryState`.
A take-over empties everything the state holds for a database, as the Redis one deletes every key
under the prefix."""

from __future__ import annotations

from dataclasses import fields

from service.binding import DatabaseIdentity
from storage.memory import MemoryState

__all__ = ["MemoryBinding"]

#: what belongs to no database: the state's own machinery
_KEPT = frozenset({"clock_ms", "down", "lock", "hearers", "last_us"})


class MemoryBinding:
    def __init__(self, state: MemoryState | None = None, prefix: str = "memory") -> None:
        self.state, self.prefix = state or MemoryState(), prefix

    def bound(self) -> DatabaseIdentity | None:
        with self.state.lock:
            self.state.check()
            raw = self.state.binding
        return None if raw is None else DatabaseIdentity.from_bytes(raw)

    def bind(self, identity: DatabaseIdentity) -> DatabaseIdentity:
        with self.state.lock:
            self.state.check()
            if self.state.binding is None:
                self.state.binding = identity.to_bytes()
                return identity
        return self.bound() or identity

    def clear_and_bind(self, identity: DatabaseIdentity) -> int:
        fresh = MemoryState()
        with self.state.lock:
            self.state.check()
            held = len(self.state.snapshots)
            for f in fields(MemoryState):
                if f.name not in _KEPT:
                    setattr(self.state, f.name, getattr(fresh, f.name))
            self.state.binding = identity.to_bytes()
        return held
