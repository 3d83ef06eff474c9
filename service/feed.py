"""Bounded staleness: while the change feed is behind, the reader does not trust snapshots.

Snapshots are kept current by the events of every edit. With change capture (``graphrag cdc``) the
events come from the database's log, and a feed that stops, or falls behind, leaves edits that no
event has announced yet: a snapshot showing such a note looks fresh (its generation was never
bumped) and is not. So the feed proves it is alive: at least once a second it records in the cache
how far behind the server it is (:class:`service.ports.FeedHeartbeat`), and the reader trusts
snapshots only while that record is younger than the bound and says the applied position trails
the server's by less than the bound. Otherwise every read is computed live from the database, which
is what Doughnut itself does on every request, so no read can show an edit older than the bound.

Invariants:

* the age of the heartbeat is measured on the cache's clock, both when it is written and when it is
  read, so no clock skew between the feed's host and the reader's enters the verdict;
* a heartbeat the reader cannot read (Redis unreachable) ages from the last one it read, by the
  reader's monotonic clock: once that estimate passes the bound, reads fall back to the database.
  A blip shorter than the bound changes nothing (and while Redis is down no snapshot is read
  anyway); a reader that has read no heartbeat yet, or found none (no change capture), trusts;
* a deployment that never ran change capture has no heartbeat and is trusted: a webhook sender's
  lost events cannot be seen by the service at all (README, "Following Doughnut's edits"). A
  deployment that retires change capture forgets its heartbeat with it (``graphrag cdc --forget``).
  One that says change capture is its source (``expected``: ``GRAPHRAG_CHANGE_SOURCE=cdc``) trusts
  no snapshot until the first heartbeat: a feed that never started has announced nothing.

The guard only decides; the composition root refreshes it from a background thread at most once a
second (worker.feed_watch), so a read that hits a snapshot adds no round trip to Redis.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from graphrag.core.errors import GraphRagError
from service.ports import FeedBeat

__all__ = ["FeedGuard"]

log = logging.getLogger("graphrag.feed")


_NEVER_RAN = ("change capture has not run yet (GRAPHRAG_CHANGE_SOURCE=cdc and no heartbeat): "
              "start `graphrag cdc`")


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f} s"


class FeedGuard:
    """Whether the change feed is recent enough for snapshots to be served, from its heartbeat.

    ``read`` returns the heartbeat (None: no change capture here); ``max_lag_ms`` 0 disables the
    guard. ``on_change(reason)`` is called once per transition (None: trusted again);
    ``clock_ms`` is monotonic (it ages a heartbeat that cannot be read)."""

    def __init__(self, read: Callable[[], FeedBeat | None], *, max_lag_ms: int,
                 on_change: Callable[[str | None], object] = lambda _reason: None,
                 clock_ms: Callable[[], int] = lambda: time.monotonic_ns() // 1_000_000,
                 expected: bool = False) -> None:
        self._read, self.max_lag_ms, self._on_change = read, max_lag_ms, on_change
        self.expected = expected
        self.clock_ms = clock_ms
        self._reason: str | None = None
        self._last: tuple[int, FeedBeat | None] | None = None  # (read at, what it said)
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.max_lag_ms > 0

    @property
    def reason(self) -> str | None:
        """Why snapshots are not trusted at the last refresh (None: they are); no I/O."""
        return self._reason

    @property
    def heard(self) -> bool:
        """Whether the last heartbeat read found one (change capture runs, or ran, here); no I/O."""
        return self._last is not None and self._last[1] is not None

    def refresh(self) -> str | None:
        """Read the heartbeat once, decide, report a transition; returns the reason (or None)."""
        reason = self._verdict() if self.enabled else None
        with self._lock:
            changed = (reason is None) != (self._reason is None)
            self._reason = reason
        if changed:
            self._transition(reason)
        return reason

    def _verdict(self) -> str | None:
        try:
            beat = self._read()
        except GraphRagError as err:  # Redis unreachable: age what was read last
            return self._unread(err)
        self._last = (self.clock_ms(), beat)
        if beat is None:
            return _NEVER_RAN if self.expected else None
        return self._judge(beat)

    def _unread(self, err: GraphRagError) -> str | None:
        read_at, beat = self._last or (0, None)
        if beat is None:  # nothing known, or no change capture here
            return _NEVER_RAN if self.expected else None
        aged = FeedBeat(beat.age_ms + max(0, self.clock_ms() - read_at), beat.behind_ms)
        reason = self._judge(aged)
        return None if reason is None else f"{reason}; the heartbeat cannot be read now ({err})"

    def _judge(self, beat: FeedBeat) -> str | None:
        bound = _seconds(self.max_lag_ms)
        if beat.age_ms > self.max_lag_ms:
            return f"the change feed's last heartbeat is {_seconds(beat.age_ms)} old (bound {bound})"
        if beat.behind_ms < 0:
            return "the change feed has not caught up with the database since it started"
        if beat.behind_ms > self.max_lag_ms:
            return f"the change feed is {_seconds(beat.behind_ms)} behind the database (bound {bound})"
        return None

    def _transition(self, reason: str | None) -> None:
        if reason is None:
            log.warning("the change feed caught up: serving snapshots again")
        else:
            log.warning("%s: answering every read from the database until it catches up", reason)
        self._on_change(reason)
