"""The dirty set: focus ids waiting for a rebuild, in Redis, surviving any worker crash.

Sharded so several workers drain at once (docs/architecture.md, "Draining"): note ``F`` lives in
shard ``F mod K``, and each shard is three sorted sets scored by the time an id was (last) dirtied,
the *urgent* lane (the edited notes and the foci showing them first), the *near* lane (the rest of a
small edit's affected set) and the *wide* lane (the rest of a large one's). The lanes of a shard
share the hash tag ``{d<shard>}``, so every script below touches one Redis Cluster slot.

Invariants the scripts keep:

* an id is in at most one lane of its shard: an add into a more urgent lane moves it there, and
  an add into a less urgent one only updates its score where it is;
* an id is removed only by ``done`` and only if its score is unchanged since ``take``, so a killed
  worker loses nothing and an edit during a rebuild is not forgotten;
* a ``take`` with a lease puts what it returns in its drain's hands until the lease expires (Redis's
  clock), and no ``take`` returns an id under a live lease, so workers drain one lane side by side
  without rebuilding the same ids; a lease belongs to the score it was taken with, so only a
  ``done``, renewal or release of that (id, score) pair touches it, and an add that moves an id to
  a more urgent lane lets go of it (a new edit's close foci do not wait for the batch that holds
  them);
* every add changes the score of an id already there (to the add's clock, or to one above the held
  score when that clock is not ahead of it), so "unchanged since ``take``" means "not added since":
  two events whose clocks read the same millisecond, or a worker whose clock runs behind, cannot
  make an add look like none;
* ``take`` reads the lanes it is given in their order, filling the batch up from the next (the
  drains take one lane at a time, so the urgent ids are written as a batch of their own), so a
  hub's thousands of dependents never delay the next edit's own note by more than one batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from redis.exceptions import NoScriptError

from service.ports import LANES, Lane
from storage.redis.client import evalsha, translated
from storage.redis.keys import Keys
from storage.redis.scripts import DIRTY_ADD_LUA, DIRTY_DONE_LUA, DIRTY_LEASE_LUA, DIRTY_TAKE_LUA

__all__ = ["MAX_SHARDS", "RedisDirtySet"]

#: The most shards a deployment may use (``adopt`` looks this far for ids left behind).
MAX_SHARDS = 256
_SCRIPTS = (DIRTY_ADD_LUA, DIRTY_TAKE_LUA, DIRTY_DONE_LUA, DIRTY_LEASE_LUA)
_OPTIONS: dict[str, dict[str, bool]] = {"zrange": {"withscores": True},
                                        "zrangebyscore": {"withscores": True}}


def _order(pair: tuple[int, float]) -> tuple[float, str]:
    return pair[1], str(pair[0])  # a sorted set's order: score, then member


def _pairs(replies: Iterable[Any]) -> list[tuple[int, float]]:
    return [(int(r[i]), float(r[i + 1])) for r in replies for i in range(0, len(r), 2)]


def _score_arg(value: float) -> str:
    return "+inf" if value == float("inf") else repr(float(value))


def _indexes(lanes: Sequence[Lane]) -> str:
    """The take script's lane argument: the lanes' indexes (from 1), in order."""
    return "".join(str(LANES.index(lane) + 1) for lane in lanes)


def _lane_of(key: str) -> Lane:
    """The lane a dirty key holds (the unsharded set of older versions: wide)."""
    return next((lane for lane in LANES if key.endswith(f":{lane}")), "wide")


class RedisDirtySet:
    """:class:`service.ports.DirtyQueue` on ``shards`` triples of sorted sets; one round trip per call
    (a pipeline across shards)."""

    def __init__(self, client: Any, keys: Keys, *, shards: int = 16) -> None:
        if not 1 <= shards <= MAX_SHARDS:
            raise ValueError(f"dirty shards must be 1..{MAX_SHARDS}, got {shards}")
        self.redis, self.keys, self._shards = client, keys, shards
        self._sha = [client.register_script(s).sha for s in _SCRIPTS]

    @property
    def shards(self) -> int:
        return self._shards

    def shard_of(self, note_id: int) -> int:
        return int(note_id) % self._shards

    def _lanes(self, shard: int) -> tuple[str, ...]:
        return tuple(self.keys.dirty(shard, lane) for lane in LANES)

    def _shard_keys(self, shard: int) -> tuple[str, ...]:
        return (*self._lanes(shard), self.keys.dirty_leases(shard))

    def _by_shard(self, note_ids: Iterable[int]) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for i in note_ids:
            groups.setdefault(self.shard_of(i), []).append(int(i))
        return groups

    def add(self, note_ids: Iterable[int], *, now_ms: int, lane: Lane = "wide") -> int:
        groups = self._by_shard(note_ids)
        calls = [(0, self._shard_keys(s), [now_ms, _indexes((lane,)), *ids])
                 for s, ids in groups.items()]
        return sum(int(r) for r in self._scripts(calls))

    def ready(self, *, settled_before_ms: float = float("inf")) -> list[int]:
        urgent, near, wide = self.ready_lanes(settled_before_ms=settled_before_ms)
        return list(dict.fromkeys(urgent + near + wide))

    def ready_lanes(self, *, settled_before_ms: float = float("inf"),
                    ) -> tuple[list[int], list[int], list[int]]:
        heads = self._pipelined([("zrange", lane, 0, 0) for s in range(self._shards)
                                 for lane in self._lanes(s)])
        n = len(LANES)
        lanes: list[list[tuple[float, int]]] = [[] for _ in LANES]
        for i, rows in enumerate(heads):
            if rows and float(rows[0][1]) <= settled_before_ms:
                lanes[i % n].append((float(rows[0][1]), i // n))
        urgent, near, wide = ([s for _, s in sorted(lane)] for lane in lanes)
        return urgent, near, wide

    def take(self, limit: int, *, shard: int | None = None,
             settled_before_ms: float = float("inf"), lanes: Sequence[Lane] = LANES,
             lease_ms: int = 0) -> list[tuple[int, float]]:
        if shard is None:
            if lease_ms:
                raise ValueError("a lease is taken from one shard at a time")
            return self._take_all(limit, settled_before_ms, lanes)
        args = [_score_arg(settled_before_ms), limit, _indexes(lanes), int(lease_ms)]
        return _pairs(self._scripts([(1, self._shard_keys(shard), args)]))

    def _take_all(self, limit: int, settled_before_ms: float,
                  lanes: Sequence[Lane]) -> list[tuple[int, float]]:
        """Every shard's oldest, lane by lane (maintenance and tests; drains go by shard)."""
        n = self._shards
        calls = [(1, self._shard_keys(s), [_score_arg(settled_before_ms), limit, _indexes([lane]), 0])
                 for lane in lanes for s in range(n)]
        replies = self._scripts(calls)
        pairs = [sorted(_pairs(replies[i * n:(i + 1) * n]), key=_order) for i in range(len(lanes))]
        return [pair for lane in pairs for pair in lane][:limit]

    def renew(self, taken: Sequence[tuple[int, float]], *, lease_ms: int) -> int:
        return self._leases(taken, lease_ms)

    def release(self, taken: Sequence[tuple[int, float]]) -> int:
        return self._leases(taken, 0)

    def _leases(self, taken: Sequence[tuple[int, float]], lease_ms: int) -> int:
        calls = [(3, self._shard_keys(s), [int(lease_ms), *args])
                 for s, args in self._pair_args(taken).items()]
        return sum(int(r) for r in self._scripts(calls))

    def _pair_args(self, taken: Sequence[tuple[int, float]]) -> dict[int, list[str]]:
        groups: dict[int, list[str]] = {}
        for note_id, score in taken:
            groups.setdefault(self.shard_of(note_id), []).extend((str(int(note_id)), repr(score)))
        return groups

    def done(self, taken: Sequence[tuple[int, float]]) -> int:
        calls = [(2, self._shard_keys(s), args) for s, args in self._pair_args(taken).items()]
        return sum(int(r) for r in self._scripts(calls))

    def size(self) -> int:
        counts = self._pipelined([("zcard", lane) for s in range(self._shards)
                                  for lane in self._lanes(s)])
        return sum(int(c) for c in counts)

    def oldest_ms(self) -> float | None:
        heads = self._pipelined([("zrange", lane, 0, 0) for s in range(self._shards)
                                 for lane in self._lanes(s)])
        return min((float(rows[0][1]) for rows in heads if rows), default=None)

    def adopt(self) -> int:
        """Move ids of shards beyond today's count, or of the unsharded set of older versions, back
        into their shards, each with its own score (lost nothing: an id leaves its old key only
        after it was added to its shard); after a change of the count, those of today's shards
        that belong to another shard now too."""
        strays = [(self.keys.legacy_dirty(), None)] + [
            (lane, s) for s in range(self._shards, MAX_SHARDS) for lane in self._lanes(s)]
        counts = self._pipelined([("zcard", key) for key, _ in strays])
        moved = 0
        for (key, shard), count in zip(strays, counts, strict=True):
            if int(count):
                moved += self._move(key, shard)
        return moved + self._rehome()

    def _rehome(self) -> int:
        """Once per change of the shard count (``<prefix>:dirty:shards`` keeps the last one this
        ran with): move the ids of today's shards that now belong to another."""
        marker = self.keys.dirty_shards()
        with translated():
            seen = self.redis.get(marker)
        if seen is not None and int(seen) == self._shards:
            return 0
        moved = sum(self._move(lane, s) for s in range(self._shards) for lane in self._lanes(s))
        with translated():
            self.redis.set(marker, self._shards)
        return moved

    def _move(self, key: str, shard: int | None) -> int:
        """Move the ids of ``key`` (a lane of ``shard``, or the unsharded set) that do not belong to
        ``shard`` into their own; their leases there are dropped (a take elsewhere never meets them)."""
        with translated():
            rows: list[tuple[bytes, float]] = self.redis.zrange(key, 0, -1, withscores=True)
        strays = [(member, score) for member, score in rows if self.shard_of(int(member)) != shard]
        for member, score in strays:  # one by one: each keeps its own score
            self.add([int(member)], now_ms=int(score), lane=_lane_of(key))
            with translated():
                self.redis.zrem(key, member)
                if shard is not None:
                    self.redis.hdel(self.keys.dirty_leases(shard), member)
        return len(strays)

    def _pipelined(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        with translated():
            pipe = self.redis.pipeline(transaction=False)
            for name, *args in commands:
                getattr(pipe, name)(*args, **_OPTIONS.get(name, {}))
            return list(pipe.execute())

    def _scripts(self, calls: Sequence[tuple[int, tuple[str, ...], Sequence[Any]]]) -> list[Any]:
        """Run one script per shard in a pipeline; after NOSCRIPT (a restarted Redis) load and rerun
        (the scripts that failed did not run, and the others are safe to run twice)."""
        if not calls:
            return []
        with translated():
            for attempt in range(2):
                pipe = self.redis.pipeline(transaction=False)
                for which, lanes, args in calls:
                    evalsha(pipe, self._sha[which], lanes, *args)
                replies: list[Any] = pipe.execute(raise_on_error=False)
                if attempt == 0 and any(isinstance(r, NoScriptError) for r in replies):
                    for script in _SCRIPTS:
                        self.redis.script_load(script)
                    continue
                break
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return replies
