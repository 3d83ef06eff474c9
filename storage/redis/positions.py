"""Change capture's place in the database's log and its heartbeat, in Redis.

:class:`RedisPositions` (:class:`service.ports.PositionStore`) is one string key without a TTL
(``<prefix>:cdc:position``): it must outlive any quiet period, and the cache's eviction policy
(``volatile-lru``) only evicts keys that have one. ``graphrag cdc`` writes it only after a
transaction's events were enqueued, so after a crash the log is read again from a boundary whose
events may be enqueued twice (harmless), never from one past an event not enqueued.

:class:`RedisAccessEpoch` (service.access) is one more counter without a TTL
(``<prefix>:cdc:access``): change capture increments it after each transaction that changes an
access row; every reader reads it.

:class:`RedisFeedHeartbeat` (:class:`service.ports.FeedHeartbeat`, service.feed) is one more string
key without a TTL (``<prefix>:cdc:heartbeat``, "<ms> <behind ms>"), written and read by a script
that takes the time from the Redis server itself, so the age a reader computes does not depend on
the clocks of the feed's and the reader's hosts. One key per script: legal on a cluster.
"""

from __future__ import annotations

from typing import Any

from service.ports import FeedBeat
from storage.redis.client import translated
from storage.redis.keys import Keys

__all__ = ["RedisAccessEpoch", "RedisFeedHeartbeat", "RedisPositions"]

_NOW_MS = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000) "
_BEAT_LUA = _NOW_MS + "redis.call('SET', KEYS[1], string.format('%d %d', now, ARGV[1])) return now"
_READ_LUA = _NOW_MS + "return {redis.call('GET', KEYS[1]), now}"


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

    def forget(self) -> None:
        with translated():
            self.redis.delete(self.key)


class RedisFeedHeartbeat:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.redis, self.key = client, keys.cdc_heartbeat()
        self._beat, self._read = client.register_script(_BEAT_LUA), client.register_script(_READ_LUA)

    def beat(self, *, behind_ms: int) -> None:
        with translated():
            self._beat(keys=[self.key], args=[int(behind_ms)])

    def read(self) -> FeedBeat | None:
        with translated():
            raw, now_ms = self._read(keys=[self.key])
        if raw is None:
            return None
        at_ms, _, behind_ms = bytes(raw).decode().partition(" ")
        try:
            return FeedBeat(max(0, int(now_ms) - int(at_ms)), int(behind_ms))
        except ValueError:  # a foreign value: as good as a heartbeat that never came
            return FeedBeat(2**62, 0)

    def forget(self) -> None:
        with translated():
            self.redis.delete(self.key)


class RedisAccessEpoch:
    def __init__(self, client: Any, keys: Keys) -> None:
        self.redis, self.key = client, keys.access_epoch()

    def read(self) -> int:
        """The count (0 before the first); a foreign value reads as -1."""
        with translated():
            value = self.redis.get(self.key)
        try:
            return 0 if value is None else int(value)
        except ValueError:
            return -1

    def bump(self) -> None:
        with translated():
            self.redis.incr(self.key)
