"""Letting a worker process's carried full-rebuild workspace go once the process sits idle.

While a full rebuild runs, a ``bulk`` worker process takes pieces back to back and carries one
workspace from piece to piece (service.full_rebuild), up to ``GRAPHRAG_PIECE_CARRY_FOCI`` foci and
about 1 GB. A drain in the same process lets it go (an event moved the edit ``seq``, so no later
piece could use it), but after a run's last piece a bulk-only process gets no task until the next
night, and nothing else would. So a timer is armed when a piece ends and disarmed when the next one
starts: a process that saw no piece for ``idle_s`` releases the workspace.

Releasing costs nothing but speed: an epoch already using the workspace keeps it to its end, and
the next piece reads what it needs afresh (service.carry). Two threads of one process arming at
once may leave an extra timer running; it only releases early.
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

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """Hold the carry for the block; the idle timer starts again when it ends."""
        self._disarm()
        try:
            yield
        finally:
            self._arm()

    def _disarm(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _arm(self) -> None:
        self._disarm()
        timer = threading.Timer(self.idle_s, self.carry.release)
        timer.daemon = True  # never keeps a stopping worker process alive
        self._timer = timer
        timer.start()
