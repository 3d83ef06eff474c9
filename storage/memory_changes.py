"""The in-memory :class:`service.ports.SnapshotChanges`: the memory cache announces every accepted
write and deletion to its state's hearers (:meth:`storage.memory.MemoryState.announce`), as the Redis
scripts publish on the note's channel, and a listener keeps what it heard of the foci it watches.

Like the Redis listener, a watch is reported by the next ``heard`` (it took effect), so the same
contract suite holds for both: whoever listens re-reads what it shows and compares.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from storage.memory import MemoryState

__all__ = ["MemoryChangeListener", "MemoryChanges"]


class MemoryChanges:
    def __init__(self, state: MemoryState) -> None:
        self.state = state
        self.listeners: list[MemoryChangeListener] = []  # every listener it made (for tests)

    def listener(self) -> MemoryChangeListener:
        self.listeners.append(MemoryChangeListener(self.state))
        return self.listeners[-1]


class MemoryChangeListener:
    def __init__(self, state: MemoryState) -> None:
        self.state = state
        self._ready = threading.Condition()
        self._watched: set[int] = set()
        self._heard: set[int] = set()
        state.hearers.append(self._hear)

    def _hear(self, focus: int) -> None:
        with self._ready:
            if focus in self._watched:
                self._heard.add(focus)
                self._ready.notify_all()

    def watch(self, note_ids: Iterable[int]) -> None:
        with self._ready:
            new = {int(i) for i in note_ids} - self._watched
            self._watched |= new
            self._heard |= new
            self._ready.notify_all()

    def unwatch(self, note_ids: Iterable[int]) -> None:
        with self._ready:
            gone = {int(i) for i in note_ids}
            self._watched -= gone
            self._heard -= gone

    def watching(self) -> set[int]:
        with self._ready:
            return set(self._watched)

    def heard(self, timeout_s: float) -> set[int]:
        self.state.check()
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._ready:
            while not self._heard and (left := deadline - time.monotonic()) > 0:
                self._ready.wait(left)
            heard, self._heard = self._heard, set()
            return heard

    def close(self) -> None:
        if self._hear in self.state.hearers:
            self.state.hearers.remove(self._hear)
