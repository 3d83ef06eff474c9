"""Change capture's place in the database's log, in Redis (:class:`service.ports.PositionStore`).

One string key without a TTL (``<prefix>:cdc:position``): it must outlive any quiet period, and the
cache's eviction policy (``volatile-lru``) only evicts keys that have one. ``graphrag cdc`` writes it
only after a transaction's events were enqueued, so after a crash the log is read again from a
boundary whose events may be enqueued twice (harmless), never from one past an event not enqueued.
"""

from __future__ import annotations

from typing import Any

from storage.redis.client import translated
from storage.redis.keys import Keys

__all__ = ["RedisPositions"]


class RedisPositions:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.redis, self.key = client, keys.cdc_position()

    def get(self) -> str | None:
        with translated():
            value = self.redis.get(self.key)
        return None if value is None else bytes(value).decode()

    def put(self, position: str) -> None:
        with translated():
            self.redis.set(self.key, position.encode())
