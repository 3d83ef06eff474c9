"""Celery tasks: each takes ids or plain JSON, fetches its runtime and calls a plain function.

Delivery (DESIGN §6): acks late, requeue when the worker process is lost, prefetch 1 (worker setting),
retries with exponential backoff and jitter on database/Redis unavailability only. ``realtime`` takes
events and drains; ``bulk`` takes the full rebuild, so a nightly run never delays edits.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from celery import shared_task
from redis.exceptions import LockError, RedisError
from redis.lock import Lock

from graphrag import DatabaseUnavailable
from storage.drain import drain_until
from storage.events import NoteEvent, record_events
from storage.snapshots import CacheUnavailable
from tasks.runtime import Runtime, current

__all__ = ["drain", "nightly_dispatch", "process_events", "rebuild_batch", "schedule_drain", "sweep"]

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
_DRAIN_FLAG_MS = 2_000


def schedule_drain(rt: Runtime, countdown_s: float | None = None) -> None:
    """Queue one drain unless one is already queued (coalesces bursts of events)."""
    if rt.snapshots.claim_flag("drain", ttl_ms=_DRAIN_FLAG_MS):
        delay = rt.debounce_ms / 1000 if countdown_s is None else countdown_s
        drain.apply_async(countdown=delay)


@shared_task(name="graphrag.process_events", **DELIVERY)
def process_events(events: list[dict[str, Any]]) -> int:
    """Resolve the affected foci of a webhook's events, bump them and mark them dirty."""
    rt = current()
    affected = record_events([NoteEvent.from_json(e) for e in events], rt.notes, rt.snapshots,
                             rt.dirty, sibling_radius=rt.sibling_radius, now_ms=rt.clock_ms())
    schedule_drain(rt)
    return len(affected)


@shared_task(name="graphrag.drain", **DELIVERY)
def drain() -> int:
    """Rebuild dirty foci for a while; one drain runs at a time, and it re-queues itself."""
    rt = current()
    rt.snapshots.clear_flag("drain")
    lock = rt.snapshots.named_lock("drain", ttl_ms=rt.drain_lock_ttl_ms)
    if not lock.acquire(blocking=False):
        schedule_drain(rt, countdown_s=0.2)
        return 0
    try:
        with kept(lock, every_s=rt.drain_lock_ttl_ms / 3000):
            written = drain_until(rt.dirty, rt.rebuild, batch=rt.drain_batch,
                                  debounce_ms=rt.debounce_ms, budget_s=rt.drain_budget_s,
                                  clock_ms=rt.clock_ms)
    finally:
        with contextlib.suppress(LockError):  # expired anyway: a crash-free drain just ends
            lock.release()
    if rt.dirty.size():
        schedule_drain(rt)
    return written


@contextlib.contextmanager
def kept(lock: Lock, *, every_s: float) -> Iterator[None]:
    """Renew ``lock`` from a background thread while the block runs, however long a batch takes;
    if the process dies the renewals stop and the lock expires after its TTL."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(every_s):
            try:
                lock.reacquire()
            except (LockError, RedisError) as err:
                log.warning("drain lock lost: %s", err)
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
    size = rt.dirty.size()
    if size:
        schedule_drain(rt, countdown_s=0)
    return size


@shared_task(name="graphrag.nightly_dispatch", **DELIVERY)
def nightly_dispatch(run_id: str | None = None, after_id: int = 0) -> int:
    """Page live note ids by key and enqueue rebuild batches, with back-pressure on ``bulk``."""
    rt = current()
    if run_id is None:
        run_id = uuid.uuid4().hex
        rt.progress.start(run_id, now_ms=rt.clock_ms())
    for _ in range(rt.pages_per_dispatch):
        if rt.bulk_backlog() > rt.max_bulk_backlog:
            nightly_dispatch.apply_async((run_id, after_id), countdown=2)
            return after_id
        ids = rt.notes.live_ids_after(after_id, rt.rebuild_page)
        if not ids:
            rt.progress.dispatched(run_id, now_ms=rt.clock_ms())
            return after_id
        rebuild_batch.apply_async((run_id, ids))
        after_id = ids[-1]
        rt.progress.enqueued(run_id, len(ids), last_id=after_id)
    nightly_dispatch.apply_async((run_id, after_id))
    return after_id


@shared_task(name="graphrag.rebuild_batch", **DELIVERY)
def rebuild_batch(run_id: str, note_ids: list[int]) -> int:
    """Rebuild one batch of a full rebuild and record its progress."""
    rt = current()
    report = rt.rebuild(note_ids)
    rt.progress.done(run_id, len(note_ids), errors=len(report.errors), now_ms=rt.clock_ms())
    if report.requeue:
        rt.dirty.add(report.requeue, now_ms=rt.clock_ms())
        schedule_drain(rt)
    return report.count
