"""Draining the dirty set: rebuild dirty foci in batches and let go of them only once written.

A drain *session* (:func:`drain_session`, what a worker's drain task runs) serves one batch at a
time, filled from the shards in :meth:`DirtyQueue.ready_lanes` order (urgent, near, wide) with ids
no other worker has leased: any number of workers drain side by side, even one shard's lane. The
leases last one batch only, so between batches every session looks again for urgent work, and an
edit's foci never wait for a batch that does not hold them.

Also the one place of the policy "a rebuild raced an edit, or its write was refused: put the focus
back" (:func:`requeue`), which every writer of snapshots (drains, full rebuilds, reader write-backs,
stale refreshes) follows: a snapshot that showed a note edited after the rebuild read its edit
sequence may hold the old text, and a refused write leaves the stored snapshot outdated with no
promise that anyone else rebuilds it, so the focus is rebuilt again from the dirty set
(docs/redis.md, "The edit race" and "The compare-and-set write").
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from service.metrics import WorkMetrics
from service.ports import LANES, DirtyQueue, Lane, Lease
from service.rebuild import RebuildReport

__all__ = ["DrainResult", "drain_once", "drain_session", "drain_until", "observed", "requeue",
           "settles_in_s"]

log = logging.getLogger("graphrag.drain")

#: A wide batch takes at most this share of ``batch`` (1/4): an edit arriving while every worker
#: rebuilds a hub's wide set waits for at most that much of a batch (a quarter of ~200 ms), at the
#: cost of a rebuild call's fixed queries four times as often on wide sets.
WIDE_SHARE = 4


@dataclass(frozen=True, slots=True)
class DrainResult:
    """One batch: foci taken, snapshots written, foci put back (raced an edit), per-note errors;
    ``dirtied_ms``: when each focus let go (fresh now) was last marked dirty (its score),
    ``lane``: the lane the batch came from, ``taken_ms`` when it was taken (the
    clock of the scores) and ``seconds``/``write_seconds`` its rebuild's wall time and the part
    of it spent writing."""

    taken: int
    written: int
    requeued: int
    errors: int
    dirtied_ms: tuple[float, ...] = ()
    lane: Lane = "wide"
    taken_ms: int = 0
    seconds: float = 0.0
    write_seconds: float = 0.0


def drain_once(
    dirty: DirtyQueue, rebuild_ids: Callable[[Iterable[int]], RebuildReport], *, batch: int,
    settled_before_ms: float, now_ms: int, shard: int | None = None,
) -> DrainResult | None:
    """Rebuild up to ``batch`` settled dirty foci; None when none is settled.

    A focus leaves the set only after every write of its rebuild (or its removal, when found
    deleted) was accepted, and only if it was not dirtied again meanwhile. Foci whose snapshot
    raced an edit, or whose write the compare-and-set refused, go back in with a new score.
    Database or Redis outages propagate and leave the set untouched (the task retries).
    A per-note error (bad data) is logged and the focus let go: retrying cannot help it.
    """
    taken = dirty.take(batch, shard=shard, settled_before_ms=settled_before_ms)
    return _rebuilt(dirty, rebuild_ids, taken, now_ms=now_ms) if taken else None


def _rebuilt(dirty: DirtyQueue, rebuild_ids: Callable[[Iterable[int]], RebuildReport],
             taken: list[tuple[int, float]], *, now_ms: int) -> DrainResult:
    """Rebuild what was taken, then let go of it (or put back what raced an edit)."""
    report = rebuild_ids([note_id for note_id, _ in taken])
    for note_id, message in report.errors.items():
        log.error("rebuild of note %s failed: %s", note_id, message)
    fresh = [(note_id, score) for note_id, score in taken if note_id not in report.requeue]
    dirty.done(fresh)
    if report.requeue:  # back in with a new score, and free for the next take
        requeue(dirty, report.requeue, now_ms=now_ms)
        dirty.release([(note_id, score) for note_id, score in taken if note_id in report.requeue])
    return DrainResult(len(taken), report.count, len(report.requeue), len(report.errors),
                       tuple(score for _, score in fresh), taken_ms=now_ms, seconds=report.seconds,
                       write_seconds=report.write_seconds)


def drain_until(
    dirty: DirtyQueue, rebuild_ids: Callable[[Iterable[int]], RebuildReport], *, batch: int,
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


def _held(lease: Lease) -> AbstractContextManager[object]:
    return contextlib.nullcontext()


def drain_session(
    dirty: DirtyQueue, rebuild_ids: Callable[[Iterable[int]], RebuildReport], *, batch: int,
    debounce_ms: int, budget_s: float, clock_ms: Callable[[], int], lease_ms: int,
    hold: Callable[[Lease], AbstractContextManager[object]] = _held,
    on_batch: Callable[[DrainResult], object] = lambda _result: None,
) -> int:
    """Drain batch after batch for up to ``budget_s``, each leased for ``lease_ms`` from the ready
    shards; returns snapshots written. Ends early when nothing settled is free to take. ``hold``
    keeps a batch's lease alive while it runs (the worker renews it from a thread); ``on_batch``
    is told each finished batch (:func:`observed`)."""
    started, written = clock_ms(), 0
    while clock_ms() - started < budget_s * 1000:
        now = clock_ms()
        result = _leased_batch(dirty, rebuild_ids, batch=batch, now_ms=now,
                               settled_before_ms=now - debounce_ms, lease_ms=lease_ms, hold=hold)
        if result is None:
            break
        on_batch(result)
        written += result.written
    return written


def observed(metrics: WorkMetrics, clock_ms: Callable[[], int]) -> Callable[[DrainResult], None]:
    """What ``drain_session`` tells ``metrics`` of each batch: one batch, its writes, its errors and
    requeues, for each focus let go the seconds since it was last marked dirty, in all and until
    the batch took it (the ``debounce`` stage), and the batch's ``compute`` and ``write`` stages."""

    def observe(result: DrainResult) -> None:
        metrics.drain_batches.inc()
        metrics.rebuilt.labels("drain").inc(result.written)
        metrics.rebuild_errors.labels("drain").inc(result.errors)
        metrics.requeued.inc(result.requeued)
        fresh, now_ms = metrics.fresh_s.labels(result.lane), clock_ms()
        waited = metrics.stages.labels("debounce")
        for dirtied_ms in result.dirtied_ms:
            fresh.observe(max(0.0, now_ms - dirtied_ms) / 1000)
            waited.observe(max(0.0, result.taken_ms - dirtied_ms) / 1000)
        metrics.stages.labels("compute").observe(max(0.0, result.seconds - result.write_seconds))
        metrics.stages.labels("write").observe(result.write_seconds)

    return observe


def _leased_batch(
    dirty: DirtyQueue, rebuild_ids: Callable[[Iterable[int]], RebuildReport], *, batch: int,
    now_ms: int, settled_before_ms: float, lease_ms: int,
    hold: Callable[[Lease], AbstractContextManager[object]],
) -> DrainResult | None:
    """One batch from as many ready shards as it takes to fill it, so a small edit touching foci of
    several shards is still one batch; what another worker leased is skipped, so workers share a
    lane. A batch comes from one lane, the first of :data:`LANES` with free settled ids
    (:meth:`DirtyQueue.ready_lanes`): the edits' closest snapshots are written first, in a batch of
    their own, then the rest of the small edits' sets, before any of a large edit's wide set, whose
    batches are at most ``batch // WIDE_SHARE``. Leases end with the batch: let go by ``done`` (or
    by a failure here), else at their expiry when the worker died."""
    ready = dirty.ready_lanes(settled_before_ms=settled_before_ms)
    taken: list[tuple[int, float]] = []
    leased = _Leased(dirty, taken, lease_ms)  # sees what the fills below add
    try:
        lane = _lease(dirty, taken, ready, batch, settled_before_ms=settled_before_ms,
                      lease_ms=lease_ms)
        if not taken:
            return None
        with hold(leased):
            result = _rebuilt(dirty, rebuild_ids, taken, now_ms=now_ms)
    except BaseException:
        leased.release()  # takeable again at once (the task retries)
        raise
    return dataclasses.replace(result, lane=lane)


def _lease(dirty: DirtyQueue, taken: list[tuple[int, float]], ready: Iterable[Iterable[int]],
           batch: int, *, settled_before_ms: float, lease_ms: int) -> Lane:
    """Fill ``taken`` from the first lane that has free ids, shard after shard of ``ready`` (one
    list per lane), leasing them; returns that lane."""
    for lane, shards in zip(LANES, ready, strict=True):
        limit = max(1, batch // WIDE_SHARE) if lane == "wide" else batch
        for shard in shards:
            if len(taken) >= limit:
                break
            taken += dirty.take(limit - len(taken), shard=shard, lanes=(lane,),
                                settled_before_ms=settled_before_ms, lease_ms=lease_ms)
        if taken:
            return lane
    return "wide"


@dataclass(frozen=True, slots=True)
class _Leased:
    """A batch's leases as a :class:`Lease`, so the worker's keeper renews them like a lock."""

    dirty: DirtyQueue
    taken: list[tuple[int, float]]
    lease_ms: int

    def acquire(self, *, wait_ms: int = 0) -> bool:
        return True  # taken with the batch

    def renew(self) -> bool:
        try:
            return self.dirty.renew(self.taken, lease_ms=self.lease_ms) > 0
        except Exception as error:  # Redis away or refusing: the keeper stops, logging it
            log.warning("renewing a drain's leases failed: %s", error)
            return False

    def release(self) -> None:
        """Never raises (it runs while another error propagates): what it cannot let go expires."""
        try:
            if self.taken:
                self.dirty.release(self.taken)
        except Exception as error:  # whatever it is, the error already propagating matters more
            log.warning("letting a drain's leases go failed (%s); they expire", error)


def settles_in_s(dirtied_ms: float, *, debounce_ms: int, now_ms: int) -> float:
    """Seconds from ``now_ms`` until a focus marked dirty at ``dirtied_ms`` is settled (0 when it
    is): the debounce counts from the focus's score, so whoever queues the drain for it does not
    wait a second time for what it did since (resolving an edit takes milliseconds, a hub's tens)."""
    return max(0.0, dirtied_ms + debounce_ms - now_ms) / 1000


def requeue(dirty: DirtyQueue, raced: Iterable[int], *, now_ms: int) -> int:
    """Put foci whose snapshots raced an edit (or whose writes were refused) back into the dirty
    set; how many were new there."""
    ids = list(raced)
    return dirty.add(ids, now_ms=now_ms) if ids else 0
