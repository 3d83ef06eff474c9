"""The in-memory :class:`service.ports.SnapshotCache`: snapshots, generations, the reverse index
and edit stamps, all in one :class:`storage.memory.MemoryState`.

It keeps the Redis cache's promises and passes the same contract suite (tests/contracts): a write is
accepted only at a generation no older than the focus's (the compare-and-set), and every write or
delete re-derives ``dep:X`` from what the focus's live snapshots still show, so the reverse index
always equals the stored snapshots; every accepted write and every deletion is announced to the
state's hearers (storage.memory_changes), as the Redis scripts publish it. Generations and the
edit sequence are hybrid clocks (the next number, or the clock in microseconds when that is
larger), so they keep increasing after a counter is lost. Snapshots expire at the hard TTL and
generations a margin later, so a generation outlives every snapshot it guards; edit stamps expire
at their own TTL and the edit sequence never does. Each operation runs under the state's one mutex,
as a Lua script runs alone.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from service.envelope import Envelope, Fact, SnapshotKey
from storage.memory import MemoryState

__all__ = ["MemoryCache"]

_INDEX_TTL_MARGIN_MS = 60_000


class MemoryCache:
    """:class:`service.ports.SnapshotCache` in memory."""

    def __init__(self, state: MemoryState | None = None, *, soft_ttl_s: int = 86_400,
                 hard_ttl_s: int = 7 * 86_400, touched_ttl_s: int = 86_400) -> None:
        if not 0 < soft_ttl_s <= hard_ttl_s:
            raise ValueError("TTLs must satisfy 0 < soft_ttl_s <= hard_ttl_s")
        self.state = state or MemoryState()
        self.soft_ttl_s, self.hard_ttl_s, self.touched_ttl_s = soft_ttl_s, hard_ttl_s, touched_ttl_s

    def _until(self, ttl_ms: int) -> int:
        return self.state.clock_ms() + ttl_ms

    # -- reads ----------------------------------------------------------------------------------
    def read(self, key: SnapshotKey) -> bytes | None:
        with self.state.lock:
            self.state.check()
            entry = self.state.snapshots.get(key)
            return entry[0] if self.state.live(entry) and entry is not None else None

    def read_current(self, key: SnapshotKey) -> tuple[bytes | None, int]:
        with self.state.lock:
            return self.read(key), self._generation(key.note_id)

    def ping(self) -> None:
        self.state.check()

    def sample(self, count: int, rng: random.Random) -> list[bytes]:
        with self.state.lock:
            self.state.check()
            now = self.state.clock_ms()
            values = [value for value, expires in self.state.snapshots.values() if expires > now]
        return rng.sample(values, min(count, len(values)))

    def dependents(self, note_ids: Iterable[Fact]) -> set[int]:
        with self.state.lock:
            self.state.check()
            ids = list(note_ids)
            viewed = [entry[0] for entry in map(self.state.view_deps.get, ids)
                      if entry is not None and self.state.live(entry)]
            return set().union(*(self.state.deps.get(i, set()) for i in ids), *viewed)

    def watch_view(self, focus: int, facts: Iterable[Fact], *, ttl_ms: int) -> None:
        with self.state.lock:
            self.state.check()
            for x in facts:
                entry = self.state.view_deps.get(x)
                foci = entry[0] if entry is not None and self.state.live(entry) else set()
                self.state.view_deps[x] = (foci | {focus}, self._until(ttl_ms))

    def shown_by(self, focus_ids: Iterable[int]) -> dict[int, set[Fact]]:
        with self.state.lock:
            self.state.check()
            return {f: set().union(*self.state.shows.get(f, {}).values()) for f in focus_ids}

    # -- generations and stamps -----------------------------------------------------------------
    def generations(self, note_ids: Iterable[int]) -> dict[int, int]:
        with self.state.lock:
            self.state.check()
            return {i: self._generation(i) for i in note_ids}

    def _generation(self, note_id: int) -> int:
        entry = self.state.generations.get(note_id)
        return entry[0] if entry is not None and self.state.live(entry) else 0

    def bump_generations(self, note_ids: Iterable[int]) -> dict[int, int]:
        with self.state.lock:
            self.state.check()
            out = {}
            for i in dict.fromkeys(note_ids):
                out[i] = max(self._generation(i) + 1, self.state.now_us())
                self.state.generations[i] = (out[i], self._until(self._index_ttl_ms()))
            return out

    def _index_ttl_ms(self) -> int:
        return self.hard_ttl_s * 1000 + _INDEX_TTL_MARGIN_MS

    def current_seq(self) -> int:
        with self.state.lock:
            self.state.check()
            return self.state.seq or self._take_seq()  # missing: the next number, as on Redis

    def stamp_touched(self, note_ids: Iterable[Fact]) -> int:
        with self.state.lock:
            self.state.check()
            self._take_seq()
            for i in note_ids:
                if self._stamp(i) < self.state.seq:
                    self.state.touched[i] = (self.state.seq, self._until(self.touched_ttl_s * 1000))
            return self.state.seq

    def _take_seq(self) -> int:
        """The next edit sequence number (the lock held), as BUMP_LUA on Redis."""
        self.state.seq = max(self.state.seq + 1, self.state.now_us())
        return self.state.seq

    def _stamp(self, note_id: Fact) -> int:
        entry = self.state.touched.get(note_id)
        return entry[0] if entry is not None and self.state.live(entry) else 0

    def touched_since(self, note_ids: Iterable[Fact], seq: int) -> set[Fact]:
        with self.state.lock:
            self.state.check()
            return {i for i in note_ids if self._stamp(i) > seq}

    # -- writes ---------------------------------------------------------------------------------
    def write_many(self, envelopes: Sequence[Envelope]) -> list[bool]:
        with self.state.lock:
            self.state.check()
            return [self._write(env) for env in envelopes]

    def _write(self, env: Envelope) -> bool:
        focus, key = env.note_id, env.key
        accepted = env.generation >= self._generation(focus)
        shows = self.state.shows.setdefault(focus, {})
        before = set().union(*shows.values())
        for stored in [k for k in shows if not self.state.live(self.state.snapshots.get(k))]:
            del shows[stored]
        if accepted:
            self.state.snapshots[key] = (env.encode(), self._until(self.hard_ttl_s * 1000))
            shows[key] = frozenset(env.depends_on)
            self._extend_generation(focus)
            self.state.announce(focus)
        self._reindex(focus, before | set(env.depends_on))
        return accepted

    def _extend_generation(self, focus: int) -> None:
        entry = self.state.generations.get(focus)
        if entry is not None and self.state.live(entry):
            self.state.generations[focus] = (entry[0], self._until(self._index_ttl_ms()))

    def _reindex(self, focus: int, candidates: set[Fact]) -> None:
        """Make ``dep:X`` hold ``focus`` exactly for the candidates its snapshots still show."""
        shown = set().union(*self.state.shows.get(focus, {}).values())
        for x in candidates:
            foci = self.state.deps.setdefault(x, set())
            if x in shown:
                foci.add(focus)
            else:
                foci.discard(focus)
                if not foci:
                    del self.state.deps[x]

    def delete_focus(self, note_id: int, keys: Iterable[SnapshotKey] = (), *,
                     generation: int | None = None) -> bool:
        with self.state.lock:
            self.state.check()
            if generation is not None and generation < self._generation(note_id):
                return False
            shows = self.state.shows.pop(note_id, {})
            for key in [*shows, *(k for k in keys if k.note_id == note_id)]:
                self.state.snapshots.pop(key, None)
            self._reindex(note_id, set().union(*shows.values()))
            self.state.announce(note_id)
            return True
