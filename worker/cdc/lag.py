"""How far ``graphrag cdc`` is behind the server: measured once a second, exposed as gauges and as the
change feed's heartbeat (service.feed).

Every second the server's current position is read (one SQL statement: the feed's own ping of the
server, so an idle database still gives a heartbeat) and kept with the time it was read. The lag is
how long ago the server was at the position the feed has stored (written after a transaction's
events were enqueued): the time of the newest kept sample the stored position has reached, so a
feed that keeps up with a busy server within a second reads 0–1 s, however rarely the two positions
are equal at the moment they are read. Until the stored position reaches a sample (a feed started
behind the server, replaying what was committed while it was down) the lag is unknown, reported as
-1 in the heartbeat: the reader does not trust snapshots while a backlog of unannounced edits may
exist. ``behind_transactions`` (GTID sequence numbers summed over domains) and ``behind_bytes`` (file
positions in the same file) are the distance to the server's position now.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from graphrag import GraphRagError
from service.metrics import CdcMetrics
from service.ports import FeedHeartbeat, PositionStore

__all__ = ["Lag", "distance", "reached", "watched_lag"]

log = logging.getLogger("graphrag.cdc")
UNKNOWN = -1


def _seqs(gtid: str) -> dict[str, int]:
    out = {}
    for part in filter(None, gtid.split(",")):
        domain, _, seq = part.strip().rpartition("-")
        if seq.isdigit():
            out[domain.split("-")[0]] = int(seq)
    return out


def distance(ours: str, server: str) -> tuple[int | None, int | None]:
    """(transactions, bytes) from ``ours`` to ``server`` (``gtid:...`` or ``file:name:offset``
    texts); None where the kinds of position cannot tell."""
    if ours.startswith("gtid:") and server.startswith("gtid:"):
        a, b = _seqs(ours[5:]), _seqs(server[5:])
        return sum(max(0, seq - a.get(d, 0)) for d, seq in b.items()), None
    if ours.startswith("file:") and server.startswith("file:"):
        (file_a, _, off_a), (file_b, _, off_b) = (p[5:].rpartition(":") for p in (ours, server))
        return None, (int(off_b) - int(off_a) if file_a == file_b else None)
    return None, None


def reached(ours: str, then: str) -> bool:
    """Whether the stored position ``ours`` is at or past the server's position ``then`` (a later
    log file, or no transaction or byte left between them)."""
    if ours == then:
        return True
    transactions, size = distance(ours, then)
    if transactions is not None:
        return transactions == 0
    if size is not None:
        return size <= 0
    if ours.startswith("file:") and then.startswith("file:"):
        return ours[5:].rpartition(":")[0] > then[5:].rpartition(":")[0]  # numbered log files
    return False


class Lag:
    """The samples of the server's position, and how long ago it was where the feed is now."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, str]] = deque()
        self._reached_at: float | None = None

    def measure(self, ours: str, server: str, now_s: float) -> float | None:
        """Seconds since the server was at ``ours`` (None: not known since the watch began)."""
        self._samples.append((now_s, server))
        while self._samples and reached(ours, self._samples[0][1]):
            self._reached_at = self._samples.popleft()[0]
        return None if self._reached_at is None else now_s - self._reached_at


@contextlib.contextmanager
def watched_lag(metrics: CdcMetrics, positions: PositionStore, server: Callable[[], str],
                heartbeat: FeedHeartbeat, every_s: float = 1.0) -> Iterator[None]:
    """Measure at once, then every ``every_s`` from a thread while the block runs: the gauges and
    the heartbeat. A measurement that fails (the database or Redis unreachable) records nothing,
    so the heartbeat ages."""
    done, lag = threading.Event(), Lag()

    def measure() -> None:
        ours, theirs = positions.get() or "", server()
        behind_s = lag.measure(ours, theirs, time.monotonic())
        metrics.behind_seconds.set(float("nan") if behind_s is None else behind_s)
        transactions, size = distance(ours, theirs)
        metrics.behind_transactions.set(transactions if transactions is not None else float("nan"))
        metrics.behind_bytes.set(size if size is not None else float("nan"))
        heartbeat.beat(behind_ms=UNKNOWN if behind_s is None else int(behind_s * 1000))

    def loop() -> None:
        while True:
            try:
                measure()
            except GraphRagError as err:
                log.debug("lag not measured: %s", err)
            if done.wait(every_s):
                return

    watcher = threading.Thread(target=loop, name="graphrag-cdc-lag", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
