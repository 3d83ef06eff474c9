"""In-memory implementations of the Redis-side ports, for fast tests and single-process demos.

They keep the same promises as the Redis adapters and pass the same contract suites
(tests/contracts): the compare-and-set on generations, a reverse index that always equals what the
stored snapshots show, hybrid-clock generations that keep increasing after a counter is lost, TTLs
on every key but the edit sequence, locks that expire. One :class:`MemoryState` holds everything
(as one Redis would) behind one mutex, so every operation is atomic as a Lua script is; its
``down`` switch makes every call raise ``CacheUnavailable`` (an unreachable Redis).

This module holds the state and the small ports (the dirty set, coordination, the progress log,
change capture's position); the snapshot cache, which keeps most of those promises, is
:class:`storage.memory_cache.MemoryCache`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from graphrag.core.errors import CacheUnavailable
from service.envelope import Fact, SnapshotKey
from service.ports import LANES, FeedBeat, Lane

__all__ = [
    "MemoryCoordination",
    "MemoryDirtySet",
    "MemoryFeedHeartbeat",
    "MemoryPositions",
    "MemoryProgress",
    "MemoryState",
]


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class MemoryState:
    """Everything one in-memory "Redis" holds; values expire at their ``(value, expires_ms)``."""

    clock_ms: Callable[[], int] = _wall_ms
    down: bool = False
    lock: threading.RLock = field(default_factory=threading.RLock)
    snapshots: dict[SnapshotKey, tuple[bytes, int]] = field(default_factory=dict)
    generations: dict[int, tuple[int, int]] = field(default_factory=dict)
    shows: dict[int, dict[SnapshotKey, frozenset[Fact]]] = field(default_factory=dict)
    deps: dict[Fact, set[int]] = field(default_factory=dict)
    view_deps: dict[Fact, tuple[set[int], int]] = field(default_factory=dict)  # (foci, expires)
    touched: dict[Fact, tuple[int, int]] = field(default_factory=dict)
    seq: int = 0
    last_us: int = 0
    dirty: dict[int, float] = field(default_factory=dict)
    lanes: dict[int, Lane] = field(default_factory=dict)  # id -> its lane
    leases: dict[int, tuple[float, int]] = field(default_factory=dict)  # id -> (score, expires ms)
    expiring: dict[str, tuple[str, int]] = field(default_factory=dict)
    progress: dict[str, dict[str, int | str]] = field(default_factory=dict)
    cdc_position: str | None = None
    cdc_heartbeat: tuple[int, int] | None = None  # (written at ms, behind ms)
    binding: bytes | None = None  # the database the state belongs to (storage.memory_binding)
    #: who hears of snapshot writes and deletions (storage.memory_changes), called with the focus
    hearers: list[Callable[[int], None]] = field(default_factory=list)

    def check(self) -> None:
        if self.down:
            raise CacheUnavailable("redis unavailable: the in-memory cache is switched off")

    def announce(self, focus: int) -> None:
        """Tell every hearer that a snapshot of ``focus`` was written or deleted."""
        for hear in list(self.hearers):
            hear(focus)

    def live(self, entry: tuple[object, int] | None) -> bool:
        return entry is not None and entry[1] > self.clock_ms()

    def now_us(self) -> int:
        """Microseconds that never repeat (the role of Redis's TIME in generation bumps)."""
        self.last_us = max(self.clock_ms() * 1000, self.last_us + 1)
        return self.last_us


class MemoryDirtySet:
    """:class:`service.ports.DirtyQueue` in memory (ordered like a sorted set: score, then id)."""

    def __init__(self, state: MemoryState | None = None, *, shards: int = 4) -> None:
        self.state, self._shards = state or MemoryState(), shards

    @property
    def shards(self) -> int:
        return self._shards

    def shard_of(self, note_id: int) -> int:
        return int(note_id) % self._shards

    def add(self, note_ids: Iterable[int], *, now_ms: int, lane: Lane = "wide") -> int:
        with self.state.lock:
            self.state.check()
            new = 0
            for i in map(int, note_ids):
                held = self.state.dirty.get(i)
                new += held is None
                # an add always changes a held score (storage/redis/queue.py)
                self.state.dirty[i] = float(now_ms if held is None or held < now_ms else held + 1)
                self._move(i, lane, fresh=held is None)
            return new

    def _move(self, note_id: int, lane: Lane, *, fresh: bool) -> None:
        """Put ``note_id`` in the more urgent of its lane and ``lane``; moved, it loses its lease
        (storage/redis/scripts.py)."""
        at = LANES.index(self.state.lanes.get(note_id, "wide"))
        if fresh or LANES.index(lane) < at:
            self.state.lanes[note_id] = lane
            if not fresh:
                self.state.leases.pop(note_id, None)

    def _lanes(self, shard: int | None, settled_before_ms: float) -> list[list[tuple[int, float]]]:
        pairs = sorted(((i, s) for i, s in self.state.dirty.items() if s <= settled_before_ms
                        and (shard is None or self.shard_of(i) == shard)),
                       key=lambda pair: (pair[1], str(pair[0])))
        return [[p for p in pairs if self.state.lanes.get(p[0], "wide") == lane] for lane in LANES]

    def ready(self, *, settled_before_ms: float = float("inf")) -> list[int]:
        urgent, near, wide = self.ready_lanes(settled_before_ms=settled_before_ms)
        return list(dict.fromkeys(urgent + near + wide))

    def ready_lanes(self, *, settled_before_ms: float = float("inf"),
                    ) -> tuple[list[int], list[int], list[int]]:
        with self.state.lock:
            self.state.check()
            urgent, near, wide = (self._by_head(lane) for lane in self._lanes(None, settled_before_ms))
            return urgent, near, wide

    def _by_head(self, lane: list[tuple[int, float]]) -> list[int]:
        """The shards of a lane's ordered pairs by their oldest one, ties by shard (as Redis)."""
        heads: dict[int, float] = {}
        for i, score in lane:
            heads.setdefault(self.shard_of(i), score)
        return [shard for shard, _ in sorted(heads.items(), key=lambda head: (head[1], head[0]))]

    def take(self, limit: int, *, shard: int | None = None,
             settled_before_ms: float = float("inf"), lanes: Sequence[Lane] = LANES,
             lease_ms: int = 0) -> list[tuple[int, float]]:
        if shard is None and lease_ms:
            raise ValueError("a lease is taken from one shard at a time")
        with self.state.lock:
            self.state.check()
            by_lane = dict(zip(LANES, self._lanes(shard, settled_before_ms), strict=True))
            pairs = [pair for lane in lanes for pair in by_lane[lane]]
            for i in [i for i, _ in pairs if i in self.state.leases]:
                if not self.state.live(self.state.leases[i]):
                    del self.state.leases[i]  # a dead lease met on the way (as in Redis)
            taken = [(i, s) for i, s in pairs if i not in self.state.leases][:limit]
            expires = self.state.clock_ms() + lease_ms
            self.state.leases.update({i: (s, expires) for i, s in taken} if lease_ms else {})
            return taken

    def renew(self, taken: Sequence[tuple[int, float]], *, lease_ms: int) -> int:
        with self.state.lock:
            self.state.check()
            mine = self._leased(taken)
            self.state.leases.update({i: (s, self.state.clock_ms() + lease_ms) for i, s in mine})
            return len(mine)

    def release(self, taken: Sequence[tuple[int, float]]) -> int:
        with self.state.lock:
            self.state.check()
            mine = self._leased(taken)
            for i, _ in mine:
                del self.state.leases[i]
            return len(mine)

    def _leased(self, taken: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
        """The pairs whose id is leased with that score."""
        return [(i, s) for i, s in taken if self.state.leases.get(i, (None, 0))[0] == s]

    def done(self, taken: Sequence[tuple[int, float]]) -> int:
        with self.state.lock:
            self.state.check()
            for i, _ in self._leased(taken):
                del self.state.leases[i]
            gone = [i for i, s in taken if self.state.dirty.get(i) == s]
            for i in gone:
                del self.state.dirty[i]
                self.state.lanes.pop(i, None)
            return len(gone)

    def size(self) -> int:
        with self.state.lock:
            self.state.check()
            return len(self.state.dirty)

    def oldest_ms(self) -> float | None:
        with self.state.lock:
            self.state.check()
            return min(self.state.dirty.values(), default=None)

    def adopt(self) -> int:
        return 0  # shards are computed on the fly: nothing is ever left outside them


class _MemoryLease:
    """An expiring lock in :class:`MemoryState`; a waiter polls until it frees or time runs out."""

    def __init__(self, state: MemoryState, name: str, ttl_ms: int) -> None:
        self.state, self.name, self.ttl_ms = state, name, ttl_ms
        self.token = f"{id(self)}"

    def _try(self) -> bool:
        with self.state.lock:
            self.state.check()
            held = self.state.expiring.get(self.name)
            if held is not None and self.state.live(held) and held[0] != self.token:
                return False
            self.state.expiring[self.name] = (self.token, self.state.clock_ms() + self.ttl_ms)
            return True

    def acquire(self, *, wait_ms: int = 0) -> bool:
        deadline = time.monotonic() + wait_ms / 1000
        while not self._try():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def renew(self) -> bool:
        with self.state.lock:
            held = self.state.expiring.get(self.name)
            if self.state.down or held is None or held[0] != self.token or not self.state.live(held):
                return False
            self.state.expiring[self.name] = (self.token, self.state.clock_ms() + self.ttl_ms)
            return True

    def release(self) -> None:
        with self.state.lock:
            held = self.state.expiring.get(self.name)
            if not self.state.down and held is not None and held[0] == self.token:
                del self.state.expiring[self.name]


class MemoryCoordination:
    """:class:`service.ports.Coordination` in memory."""

    def __init__(self, state: MemoryState | None = None) -> None:
        self.state = state or MemoryState()

    def lock(self, name: str, *, ttl_ms: int) -> _MemoryLease:
        return _MemoryLease(self.state, f"lock:{name}", ttl_ms)

    def snapshot_lock(self, key: SnapshotKey, *, ttl_ms: int) -> _MemoryLease:
        return _MemoryLease(self.state, f"snaplock:{key}", ttl_ms)

    def _claim(self, name: str, ttl_ms: int) -> bool:
        with self.state.lock:
            self.state.check()
            if self.state.live(self.state.expiring.get(name)):
                return False
            self.state.expiring[name] = ("1", self.state.clock_ms() + ttl_ms)
            return True

    def _drop(self, name: str) -> None:
        with self.state.lock:
            self.state.check()
            self.state.expiring.pop(name, None)

    def claim_flag(self, name: str, *, ttl_ms: int) -> bool:
        return self._claim(f"flag:{name}", ttl_ms)

    def clear_flag(self, name: str) -> None:
        self._drop(f"flag:{name}")

    def claim_refresh(self, note_id: int, *, ttl_s: int) -> bool:
        return self._claim(f"refresh:{note_id}", ttl_s * 1000)

    def release_refresh(self, note_id: int) -> None:
        self._drop(f"refresh:{note_id}")

    def claim_delivery(self, token: str, *, ttl_s: int) -> bool:
        return self._claim(f"webhook:{token}", ttl_s * 1000)

    def seen_delivery(self, token: str) -> bool:
        with self.state.lock:
            self.state.check()
            return self.state.live(self.state.expiring.get(f"webhook:{token}"))


class MemoryProgress:
    """:class:`service.ports.ProgressLog` in memory (one run at a time per name)."""

    def __init__(self, state: MemoryState | None = None, name: str = "nightly") -> None:
        self.state, self.name = state or MemoryState(), name

    def _fields(self) -> dict[str, int | str]:
        return self.state.progress.setdefault(self.name, {})

    def start(self, run_id: str, *, now_ms: int) -> None:
        with self.state.lock:
            self.state.check()
            self.state.progress[self.name] = {"run": run_id, "startedAt": now_ms, "lastId": 0,
                                              "enqueued": 0, "done": 0, "errors": 0}

    def _bump(self, run_id: str, **fields: int) -> None:
        with self.state.lock:
            self.state.check()
            current = self._fields()
            if current.get("run") != run_id:
                return
            for name, value in fields.items():
                if name in ("lastId", "dispatchedAt", "finishedAt"):
                    current[name] = value
                else:
                    current[name] = int(current.get(name, 0)) + value

    def enqueued(self, run_id: str, count: int, *, last_id: int) -> None:
        self._bump(run_id, enqueued=count, lastId=last_id)

    def dispatched(self, run_id: str, *, now_ms: int) -> None:
        self._bump(run_id, dispatchedAt=now_ms)

    def done(self, run_id: str, count: int, *, errors: int, now_ms: int) -> None:
        self._bump(run_id, done=count, errors=errors)
        status = self.status()
        if status.get("dispatchedAt") and int(status.get("done", 0)) >= int(status.get("enqueued", 0)):
            self._bump(run_id, finishedAt=now_ms)

    def status(self) -> dict[str, int | str]:
        with self.state.lock:
            self.state.check()
            return dict(self._fields())


class MemoryPositions:
    """Change capture's log position, in process memory (fails like the others when ``down``)."""

    def __init__(self, state: MemoryState | None = None) -> None:
        self.state = state or MemoryState()

    def get(self) -> str | None:
        with self.state.lock:
            self.state.check()
            return self.state.cdc_position

    def put(self, position: str) -> None:
        with self.state.lock:
            self.state.check()
            self.state.cdc_position = position

    def forget(self) -> None:
        with self.state.lock:
            self.state.check()
            self.state.cdc_position = None


class MemoryFeedHeartbeat:
    """The change feed's heartbeat, in process memory, aged on the state's clock."""

    def __init__(self, state: MemoryState | None = None) -> None:
        self.state = state or MemoryState()

    def beat(self, *, behind_ms: int) -> None:
        with self.state.lock:
            self.state.check()
            self.state.cdc_heartbeat = (self.state.clock_ms(), int(behind_ms))

    def read(self) -> FeedBeat | None:
        with self.state.lock:
            self.state.check()
            if self.state.cdc_heartbeat is None:
                return None
            at_ms, behind_ms = self.state.cdc_heartbeat
            return FeedBeat(max(0, self.state.clock_ms() - at_ms), behind_ms)

    def forget(self) -> None:
        with self.state.lock:
            self.state.check()
            self.state.cdc_heartbeat = None
