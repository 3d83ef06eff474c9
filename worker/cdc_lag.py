"""How far ``graphrag cdc`` is behind the server: compared once a second, exposed as gauges.

The stored position (written after each transaction's events were enqueued) against the server's
current one: equal means caught up. ``behind_seconds`` is the time since they were last equal (0 when
caught up), ``behind_transactions`` the GTID sequence numbers between them summed over domains, and
``behind_bytes`` the distance in the same log file for file positions.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator

from graphrag import GraphRagError
from service.metrics import CdcMetrics
from service.ports import PositionStore

__all__ = ["distance", "watched_lag"]

log = logging.getLogger("graphrag.cdc")


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


@contextlib.contextmanager
def watched_lag(metrics: CdcMetrics, positions: PositionStore, server: Callable[[], str],
                every_s: float = 1.0) -> Iterator[None]:
    """Update the lag gauges from a thread while the block runs."""
    done, since = threading.Event(), [time.monotonic()]

    def measure() -> None:
        ours, theirs = positions.get() or "", server()
        if ours == theirs:
            since[0] = time.monotonic()
        metrics.behind_seconds.set(time.monotonic() - since[0])
        transactions, size = distance(ours, theirs)
        metrics.behind_transactions.set(transactions if transactions is not None else float("nan"))
        metrics.behind_bytes.set(size if size is not None else float("nan"))

    def loop() -> None:
        while not done.wait(every_s):
            try:
                measure()
            except GraphRagError as err:
                log.debug("lag not measured: %s", err)

    watcher = threading.Thread(target=loop, name="graphrag-cdc-lag", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
