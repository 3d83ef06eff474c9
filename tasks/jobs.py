"""Celery tasks: each takes ids or plain JSON, fetches its runtime and calls a plain function.

Delivery (docs/architecture.md, "Delivery"): acks late, requeue when the worker process is lost,
prefetch 1 (worker setting), retries with exponential backoff and jitter on database/cache
unavailability only. ``realtime`` takes events and drains; ``bulk`` takes the full rebuild, so a
nightly run never delays edits.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from celery import shared_task

from graphrag.core.errors import CacheUnavailable, DatabaseUnavailable
from service.dispatch import dispatch_pieces
from service.drain import drain_session, observed, requeue, settles_in_s
from service.events import record_settling
from service.note_event import NoteEvent
from service.ports import Lease
from service.rebuild import RebuildReport, start_full_rebuild
from tasks.message import (
    CONTINUED,
    DRAIN_FLAG_TTL_MS,
    DUE_HEADER,
    EDITED,
    JOIN,
    RETRY,
    SENT_HEADER,
    SETTLE,
    SWEEP,
    drain_options,
)
from tasks.runtime import Runtime, current

__all__ = [
    "drain", "nightly_dispatch", "process_events", "rebuild_batch", "rebuild_piece", "schedule_drain",
    "sweep",
]

log = logging.getLogger("graphrag.tasks")
DELIVERY: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": (DatabaseUnavailable, CacheUnavailable),
    "retry_backoff": 1,
    "retry_backoff_max": 60,  # well below the broker's visibility timeout
    "retry_jitter": True,
    "max_retries": 60,
}


def schedule_drain(rt: Runtime, countdown_s: float | None = None, *, reason: str = EDITED) -> None:
    """Queue one drain unless one is already queued for the same ``reason`` (coalesces bursts of
    events; ``CONTINUED`` always queues); a wait the broker cannot express (under a second on
    RabbitMQ) is spent by the task before it drains, less the time its delivery took
    (tasks.message.drain_options)."""
    if reason == CONTINUED or rt.coordination.claim_flag(reason, ttl_ms=DRAIN_FLAG_TTL_MS):
        delay_s = rt.debounce_ms / 1000 if countdown_s is None else countdown_s
        drain.apply_async(**drain_options(reason, delay_s, now_ms=rt.clock_ms(),
                                          subsecond_countdowns=rt.subsecond_countdowns))


def _still_to_wait_s(wait_s: float, sent_ms: object, now_ms: int) -> float:
    """What is left of a drain's ``wait_s`` once its message arrives: the wait counts from when the
    message was sent (``sent_ms``, wall-clock; a message without it waits it all), so a drain that
    queued behind other work waits no longer than its foci need; never more than a second."""
    waited_s = max(0, now_ms - sent_ms) / 1000 if isinstance(sent_ms, int) else 0.0
    return min(max(wait_s - waited_s, 0.0), 1.0)


@shared_task(name="graphrag.process_events", **DELIVERY)
def process_events(events: list[dict[str, Any]]) -> int:
    """Resolve the affected foci of a webhook's events, bump them and mark them dirty; the time the
    message says it was sent (tasks.message.SENT_HEADER; absent from older ones) times its
    delivery."""
    rt = current()
    stages, sent_ms = rt.metrics.stages, process_events.request.get(SENT_HEADER)
    if isinstance(sent_ms, int):
        stages.labels("delivery").observe(max(0, rt.clock_ms() - sent_ms) / 1000)
    with stages.labels("resolve").time():
        affected, settles_s = record_settling(
            [NoteEvent.from_json(e) for e in events], rt.notes, rt.snapshots, rt.dirty,
            sibling_radius=rt.sibling_radius, debounce_ms=rt.debounce_ms, clock_ms=rt.clock_ms)
    schedule_drain(rt, settles_s)
    return len(affected)


@shared_task(name="graphrag.drain", **DELIVERY)
def drain(wait_s: float = 0.0, flag: str = EDITED) -> int:
    """Rebuild dirty foci for ``drain_budget_s`` (then the batch it is in), those no other worker
    has leased (service.drain.drain_session); asks for a second drain when more shards wait, so idle
    workers join in, and re-queues itself while anything is left — behind the events that arrived
    meanwhile, so a hub's thousands of foci never keep an edit's event waiting for long."""
    rt = current()
    due_ms = drain.request.get(DUE_HEADER)
    if flag == EDITED and isinstance(due_ms, int):  # (an edit's drain: from due to started)
        rt.metrics.stages.labels("delivery").observe(max(0, rt.clock_ms() - due_ms) / 1000)
    time.sleep(_still_to_wait_s(wait_s, drain.request.get(SENT_HEADER), rt.clock_ms()))
    if flag != CONTINUED:
        rt.coordination.clear_flag(flag)
    if flag not in (JOIN, CONTINUED) and len(rt.dirty.ready()) > 1:
        schedule_drain(rt, countdown_s=0, reason=JOIN)
    written = drain_session(rt.dirty, rt.rebuild, batch=rt.drain_batch,
                            debounce_ms=rt.debounce_ms, budget_s=rt.drain_budget_s,
                            clock_ms=rt.clock_ms, lease_ms=rt.drain_lease_ms,
                            hold=lambda lease: kept(lease, every_s=rt.drain_lease_ms / 3000),
                            on_batch=observed(rt.metrics, rt.clock_ms))
    if rt.dirty.size():
        countdown_s, reason = _next_drain(rt, written)
        schedule_drain(rt, countdown_s, reason=reason)
    return written


def _next_drain(rt: Runtime, written: int) -> tuple[float | None, str]:
    """(when, why) to drain again: while settled foci wait, at once as this drain's successor
    (behind what was queued meanwhile), or after 0.2 s when this one wrote nothing (other workers
    hold them); when only foci not yet settled wait, when the oldest of them settles, whether
    this drain wrote or not (a drain that came before an edit's foci settled must not leave them
    waiting 0.2 s)."""
    now_ms = rt.clock_ms()
    if rt.dirty.ready(settled_before_ms=now_ms - rt.debounce_ms):
        return (0, CONTINUED) if written else (0.2, RETRY)
    oldest_ms = rt.dirty.oldest_ms()
    if oldest_ms is None:
        return None, RETRY
    return settles_in_s(oldest_ms, debounce_ms=rt.debounce_ms, now_ms=now_ms), SETTLE


@contextlib.contextmanager
def kept(lease: Lease, *, every_s: float) -> Iterator[None]:
    """Renew ``lease`` from a background thread while the block runs, however long a batch takes;
    if the process dies the renewals stop and the lease expires after its TTL."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(every_s):
            if not lease.renew():
                log.warning("drain lease lost")
                return

    keeper = threading.Thread(target=renew, name="graphrag-drain-lock", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()


@shared_task(name="graphrag.sweep", **DELIVERY)
def sweep() -> int:
    """Safety net (beat, every few seconds): queue a drain if anything is dirty."""
    rt = current()
    rt.dirty.adopt()
    size = rt.dirty.size()
    if size:
        schedule_drain(rt, countdown_s=0, reason=SWEEP)
    return size


@shared_task(name="graphrag.nightly_dispatch", **DELIVERY)
def nightly_dispatch(run_id: str | None = None, after_id: int = 0,
                     cursor: list[int | None] | None = None) -> int:
    """Hand out the database's pieces as ``rebuild_piece`` tasks, from ``cursor`` (the last
    piece's notebook and last id), with back-pressure on ``bulk`` (service.dispatch).
    ``after_id`` is kept for a message queued by an older version (it starts over)."""
    rt = current()
    if run_id is None:
        run_id = uuid.uuid4().hex
        rt.progress.start(run_id, now_ms=rt.clock_ms())
        # A full rebuild reads the database afresh (it recovers changes no event announced): no
        # page of it uses a carried workspace, and no computation that read before it overwrites
        # what its pages write (service.rebuild).
        start_full_rebuild(rt.snapshots)
    after = None if cursor is None else (cursor[0], int(cursor[1] or 0))
    step = dispatch_pieces(
        rt.notes, rt.progress, run_id=run_id, after=after, pieces=rt.pages_per_dispatch,
        max_notes=rt.rebuild_piece_notes, backlog=rt.bulk_backlog, max_backlog=rt.max_bulk_backlog,
        enqueue=lambda ids: rebuild_piece.apply_async((run_id, ids)), now_ms=rt.clock_ms,
    )
    if step.state != "finished":
        delay = 2 if step.state == "waiting" else None
        nightly_dispatch.apply_async((run_id, step.after_id, step.cursor), countdown=delay)
    return step.after_id


@shared_task(name="graphrag.rebuild_piece", **DELIVERY)
def rebuild_piece(run_id: str, note_ids: list[int]) -> int:
    """Rebuild one piece of a full rebuild (its notes loaded first, into the workspace the process
    carried on from its last piece while no edit was recorded) and record its progress."""
    return _rebuilt(run_id, note_ids, current().rebuild_piece)


@shared_task(name="graphrag.rebuild_batch", **DELIVERY)
def rebuild_batch(run_id: str, note_ids: list[int]) -> int:
    """Rebuild one page of ids of a full rebuild (a message queued before pieces existed)."""
    return _rebuilt(run_id, note_ids, current().rebuild)


def _rebuilt(run_id: str, note_ids: list[int],
             how: Callable[[list[int]], RebuildReport]) -> int:
    rt = current()
    report = how(note_ids)
    rt.progress.done(run_id, len(note_ids), errors=len(report.errors), now_ms=rt.clock_ms())
    rt.metrics.rebuilt.labels("full").inc(report.count)
    rt.metrics.rebuild_errors.labels("full").inc(len(report.errors))
    requeue(rt.dirty, report.requeue, now_ms=rt.clock_ms())
    if report.requeue:
        schedule_drain(rt)
    return report.count
