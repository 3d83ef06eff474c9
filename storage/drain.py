"""Draining the dirty set: rebuild dirty foci in batches and let go of them only once written."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from storage.dirty import DirtySet
from storage.rebuild import RebuildReport

__all__ = ["DrainResult", "drain_once"]

log = logging.getLogger("graphrag.drain")


@dataclass(frozen=True, slots=True)
class DrainResult:
    """One batch: foci taken, snapshots written, foci put back (raced an edit), per-note errors."""

    taken: int
    written: int
    requeued: int
    errors: int


def drain_once(
    dirty: DirtySet, rebuild_ids: Callable[[Iterable[int]], RebuildReport], *, batch: int,
    settled_before_ms: float, now_ms: int,
) -> DrainResult | None:
    """Rebuild up to ``batch`` settled dirty foci; None when none is settled.

    A focus leaves the set only after its rebuild was written or found obsolete, and only if it was
    not dirtied again meanwhile. Foci whose snapshot raced an edit go back in with a new score.
    Database or Redis outages propagate and leave the set untouched (the task retries).
    A per-note error (bad data) is logged and the focus let go: retrying cannot help it.
    """
    taken = dirty.take(batch, settled_before_ms=settled_before_ms)
    if not taken:
        return None
    report = rebuild_ids([note_id for note_id, _ in taken])
    for note_id, message in report.errors.items():
        log.error("rebuild of note %s failed: %s", note_id, message)
    dirty.done([(note_id, score) for note_id, score in taken if note_id not in report.requeue])
    if report.requeue:
        dirty.add(report.requeue, now_ms=now_ms)
    return DrainResult(len(taken), report.count, len(report.requeue), len(report.errors))


def drain_until(
    dirty: DirtySet, rebuild_ids: Callable[[Iterable[int]], RebuildReport], *, batch: int,
    debounce_ms: int, budget_s: float, clock_ms: Callable[[], int],
    after_batch: Callable[[], object] = lambda: None,
) -> int:
    """Drain settled foci batch after batch for up to ``budget_s``; returns snapshots written.

    A focus is *settled* once ``debounce_ms`` passed since it was last dirtied, so a burst of edits
    to one note costs a handful of rebuilds, not one per edit.
    """
    started, written = clock_ms(), 0
    while clock_ms() - started < budget_s * 1000:
        now = clock_ms()
        result = drain_once(dirty, rebuild_ids, batch=batch, settled_before_ms=now - debounce_ms,
                            now_ms=now)
        if result is None:
            break
        written += result.written
        after_batch()
    return written
