"""Keeps this process's access epoch (service.access) current from a background thread.

The first question in a process reads the epoch at once (one round trip to Redis), then a daemon
thread reads it every ``every_s``; a process forked after that starts its own thread. So a read
asks an in-memory number, never Redis, and it is at most about ``every_s`` older than the counter.
When the counter cannot be read, the epoch becomes a number no answer was ever filed under (one
less than the last such number), so nothing remembered is used until Redis answers again.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from graphrag import GraphRagError

__all__ = ["AccessWatch"]

log = logging.getLogger("graphrag.access")


class AccessWatch:
    """Call it for the access epoch as last read through ``read``, refreshed every ``every_s``."""

    def __init__(self, read: Callable[[], int], *, every_s: float = 0.2) -> None:
        self.read, self.every_s = read, every_s
        self._value, self._unreadable = -2, -2
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def __call__(self) -> int:
        if self._pid != os.getpid():
            self._start()
        return self._value

    def refresh(self) -> None:
        try:
            self._value = self.read()
        except GraphRagError as err:
            self._unreadable -= 1
            self._value = self._unreadable
            log.warning("the access epoch could not be read, nothing remembered is used: %s", err)

    def _start(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            self._stop = threading.Event()
            self.refresh()
            threading.Thread(target=self._run, args=(self._stop,), name="graphrag-access-watch",
                             daemon=True).start()
            self._pid = os.getpid()

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.every_s):
            self.refresh()

    def close(self) -> None:
        """Stop refreshing (the next question starts again)."""
        with self._lock:
            self._stop.set()
            self._pid = None
