"""Keeps the change feed's verdict (service.feed.FeedGuard) current from a background thread.

The first question in a process refreshes the verdict at once (one round trip to Redis), then a
daemon thread refreshes it once a second; a process forked after that starts its own thread. So a
read that hits a snapshot asks an in-memory verdict, never Redis, and the verdict is at most about a
second older than the heartbeat it was read from. Whether this process's thread runs is a flag that
a fork clears in the child (service.forks), so a read asks no system call either.
"""

from __future__ import annotations

import logging
import threading

from service.feed import FeedGuard
from service.forks import in_forked_child

__all__ = ["FeedWatch"]

log = logging.getLogger("graphrag.feed")


class FeedWatch:
    """``reason()``: why snapshots are not trusted now (None: they are), refreshed every ``every_s``."""

    def __init__(self, guard: FeedGuard, *, every_s: float = 1.0) -> None:
        self.guard, self.every_s = guard, every_s
        self._watching = False  # whether this process's thread runs (cleared in a forked child)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        in_forked_child(self._forked)

    def reason(self) -> str | None:
        if not self.guard.enabled:
            return None
        if not self._watching:
            self._start()
        return self.guard.reason

    def _start(self) -> None:
        with self._lock:
            if self._watching:
                return
            self._stop = threading.Event()
            self.guard.refresh()
            threading.Thread(target=self._run, args=(self._stop,), name="graphrag-feed-watch",
                             daemon=True).start()
            self._watching = True

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.every_s):
            try:
                self.guard.refresh()
            except Exception:  # a bug must not freeze the verdict silently: say so, go on
                log.exception("the change feed's verdict could not be refreshed")

    def close(self) -> None:
        """Stop refreshing (the next question starts again)."""
        with self._lock:
            self._stop.set()
            self._watching = False

    def _forked(self) -> None:
        """In a forked child: no thread watches here yet, and a lock another thread held at the
        fork would never be released."""
        self._watching, self._lock = False, threading.Lock()

