"""The dirty set: focus ids waiting for a rebuild, in Redis, surviving any worker crash.

A sorted set scored by the time a note was (last) dirtied. Drains read ids without removing them and
remove an id only after its rebuild was written (or found obsolete) *and* only if its score has not
changed meanwhile, so a killed worker loses nothing and an edit during a rebuild is not forgotten.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import redis

from storage.keys import Keys
from storage.scripts import DIRTY_DONE_LUA
from storage.snapshots import translated

__all__ = ["DirtySet"]


class DirtySet:
    """``add`` on events, ``take`` + ``done`` in drains; every call is one round trip."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.redis, self.key = client, keys.dirty()
        self._done = client.register_script(DIRTY_DONE_LUA)

    def add(self, note_ids: Iterable[int], *, now_ms: int) -> int:
        """Mark notes dirty (a re-added note takes the new score); returns how many were new."""
        mapping = {str(int(i)): now_ms for i in note_ids}
        if not mapping:
            return 0
        with translated():
            added = self.redis.zadd(self.key, mapping)
        return int(added or 0)

    def take(self, limit: int, *, settled_before_ms: float = float("inf")) -> list[tuple[int, float]]:
        """Up to ``limit`` oldest (id, score) pairs dirtied before ``settled_before_ms``; not removed."""
        with translated():
            rows = self.redis.zrangebyscore(self.key, "-inf", settled_before_ms, start=0, num=limit,
                                            withscores=True)
        pairs: list[tuple[bytes, float]] = rows  # type: ignore[assignment]
        return [(int(member), float(score)) for member, score in pairs]

    def done(self, taken: Sequence[tuple[int, float]]) -> int:
        """Remove the pairs whose score is unchanged since ``take``; returns how many were removed."""
        if not taken:
            return 0
        args = [v for note_id, score in taken for v in (note_id, repr(score))]
        with translated():
            return int(self._done(keys=[self.key], args=args))

    def size(self) -> int:
        with translated():
            return int(self.redis.zcard(self.key))

    def oldest_ms(self) -> float | None:
        """The score of the longest-waiting id (for metrics and ``rebuild --status``)."""
        with translated():
            rows = self.redis.zrange(self.key, 0, 0, withscores=True)
        return float(rows[0][1]) if rows else None
