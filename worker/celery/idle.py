"""Letting a worker process's carried full-rebuild workspace go once the process sits idle.

While a full rebuild runs, a ``bulk`` worker process takes pieces back to back and carries one
workspace from piece to piece (service.full_rebuild), up to ``GRAPHRAG_PIECE_CARRY_FOCI`` foci and
about 1 GB. A drain in the same process lets it go (an event moved the edit ``seq``, so no later
piece could use it), but after a run's last piece a bulk-only process gets no task until the next
night, and nothing else would. So a timer is armed when a piece ends and disarmed when the next one
starts: a process that saw no piece for ``idle_s`` releases the workspace.

Releasing costs nothing but speed: an epoch already using the workspace keeps it to its end, and
the next piece reads what it needs afresh (service.carry). Threads of one process count their
blocks in use, and the timer is armed when the last one ends.

A drain carry is wrapped the same way with ``GRAPHRAG_CARRY_AGE_MS`` as its idle time: after that
long it could not be used any more (service.carry), so a realtime worker lets it go then rather than
at its next drain.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from service.carry import Carry

__all__ = ["IdleRelease"]


class IdleRelease:
    """Releases ``carry`` when no :meth:`in_use` block ran for ``idle_s`` seconds."""

    def __init__(self, carry: Carry, idle_s: float) -> None:
        self.carry, self.idle_s = carry, idle_s
        self._timer: threading.Timer | None = None
        self._active, self._lock = 0, threading.Lock()

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """Hold the carry for the block; the idle timer starts again when the last block ends."""
        with self._lock:
            self._active += 1
            self._disarm()
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    self._arm()

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self) -> None:
        self._timer = threading.Timer(self.idle_s, self.carry.release)
        self._timer.daemon = True  # never keeps a stopping worker process alive
        self._timer.start()
