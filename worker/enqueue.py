"""Handing note events on to the workers: what the HTTP process's webhook and change capture share.

Both inputs can end in the same call: a list of events in the webhook's JSON shape becomes one
``graphrag.process_events`` task on the ``realtime`` queue (:func:`celery_enqueuer`), sent by name,
so neither process needs the tasks' code or a worker's runtime. The webhook first tries to record
the events itself (:func:`recording`): it resolves them, outdates and marks dirty their affected
foci and queues the drain for when they settle (:func:`celery_drainer`), so an edit never waits for
a free worker process to be resolved (behind a drain batch: tens of milliseconds, a hub's hundreds);
only when that fails do the events go to the event task, which retries. Invariants:

* **A message the broker did not take is an error, never silence.** Sending does not retry and any
  broker or socket error becomes :class:`EnqueueFailed`: the webhook answers 503 (its sender
  retries), change capture does not store the position after the transaction (it reads it again).
* **No read serves an edited note's old text once an input has handed its event on.**
  :func:`outdating` outdates, with Redis alone, every snapshot that shows a note the events name
  before it enqueues, so the outdating can never land after a worker took the event's foci.
* **A recorded edit is in the dirty set before the answer**, and a drain is queued for it (or was
  already, under the flag the workers' drains for edits share: tasks.message), so what the event
  task guaranteed holds without it: its foci are rebuilt once settled, and the sweep rebuilds them
  if that drain is lost.
* **Every message says when it was sent** (header ``tasks.message.SENT_HEADER``, wall-clock
  ms), so the worker can time its delivery. With
  ``stages`` (service.metrics.edit_stages) the outdating and the sending are timed too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from celery import Celery
from kombu.exceptions import OperationalError
from prometheus_client import CollectorRegistry, Histogram

from graphrag.core.errors import GraphRagError
from service.events import record_settling
from service.metrics import edit_stages
from service.note_event import NoteEvent
from service.ports import Coordination, DirtyQueue, NoteSource, SnapshotCache
from tasks.message import DRAIN_FLAG_TTL_MS, EDITED, SENT_HEADER, drain_options

__all__ = ["DrainIn", "Enqueue", "EnqueueFailed", "celery_drainer", "celery_enqueuer", "outdating",
           "recorder", "recording", "warm_sender"]

log = logging.getLogger("graphrag.server")
#: Hands a delivery's events on to the event task (raises EnqueueFailed when it cannot).
Enqueue = Callable[[list[dict[str, Any]]], None]
#: Queues an edit's drain to run in the seconds given (raises EnqueueFailed when it cannot).
DrainIn = Callable[[float], None]


class EnqueueFailed(Exception):
    """The broker did not take the message."""


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _or_unscraped(stages: Histogram | None) -> Histogram:
    return stages if stages is not None else edit_stages(CollectorRegistry())


def warm_sender(celery: Celery) -> bool:
    """Make now what ``celery``'s first send would make (the broker transport's and the result
    backend's modules, imported on first use; a producer and its broker connection, kept in the
    app's pool for the sends after), so the first edit after a start does not wait for them (tens
    of milliseconds to a few hundred). Whether the broker answered; one that does not is left to
    the first send, which reports it as every send does."""
    try:
        celery.backend  # noqa: B018 (imports the backend's module)
        with celery.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=0)
    except (OperationalError, OSError) as err:
        log.info("the broker did not answer a warm-up (%s): the first send connects", err)
        return False
    except Exception:  # best effort in a thread of its own: the first send reports what is wrong
        log.warning("the sender's warm-up failed: the first send connects", exc_info=True)
        return False
    return True


def celery_enqueuer(celery: Celery, stages: Histogram | None = None) -> Enqueue:
    """Send the events task by name, with the wall-clock time it was sent; a broker that does not
    take it raises EnqueueFailed. ``stages`` (service.metrics.edit_stages; else one nobody
    scrapes) times the sending. The sender is warmed up meanwhile (:func:`warm_sender`, in a
    thread of its own: a broker that does not answer never holds up a start)."""
    sending = _or_unscraped(stages).labels("enqueue")
    threading.Thread(target=warm_sender, args=(celery,), name="graphrag-warm-sender",
                     daemon=True).start()

    def enqueue(events: list[dict[str, Any]]) -> None:
        try:
            with sending.time():
                celery.send_task("graphrag.process_events", args=[events], queue="realtime",
                                 headers={SENT_HEADER: _wall_ms()}, retry=False)
        except (OperationalError, OSError) as err:
            raise EnqueueFailed(f"broker unavailable: {err.__class__.__name__}") from err

    return enqueue


def outdating(enqueue: Enqueue, outdate: Callable[[list[int]], object],
              stages: Histogram | None = None) -> Enqueue:
    """``outdate`` the notes the events name (service.events.outdate_shown: every snapshot showing
    one becomes outdated, which the reader computes instead of serving), then ``enqueue``: once the
    webhook has answered, or change capture has handed on a transaction, no read shows an edited
    note's old text.

    Outdating comes first so that it precedes the event task, which bumps and marks dirty the
    whole affected set: after it, a worker may already have taken the event's foci, and its
    writes would then be refused by this bump and redone (service.rebuild) — correct, but a
    rebuild wasted. The edit is committed in Doughnut's database either way, so a delivery the
    broker refuses (503, the sender retries) outdates too. Best effort: a failure is logged and
    the event task bumps them anyway."""

    outdated = _or_unscraped(stages).labels("outdate")

    def outdate_then_enqueue(events: list[dict[str, Any]]) -> None:
        ids = [e["noteId"] for e in events if e.get("noteId") is not None]
        if ids:
            try:
                with outdated.time():
                    outdate(ids)
            except Exception:  # best effort: the event task outdates them too
                log.exception("could not outdate the snapshots of %d edited notes at once (their "
                              "event task will)", len(ids))
        enqueue(events)

    return outdate_then_enqueue


def celery_drainer(celery: Celery, coordination: Coordination, *, subsecond_countdowns: bool,
                   stages: Histogram | None = None) -> DrainIn:
    """Queue an edit's drain (``graphrag.drain`` by name, tasks.message.drain_options) unless one
    is queued already: the flag is the one the event task's drains claim, so the edits of a burst
    share a drain wherever they were recorded. A broker that does not take it raises
    EnqueueFailed and lets the flag go (the next edit queues one). ``stages`` times the sending
    (``enqueue``)."""
    sending = _or_unscraped(stages).labels("enqueue")

    def drain_in(delay_s: float) -> None:
        if not coordination.claim_flag(EDITED, ttl_ms=DRAIN_FLAG_TTL_MS):
            return
        options = drain_options(EDITED, delay_s, subsecond_countdowns=subsecond_countdowns,
                                now_ms=_wall_ms())
        try:
            with sending.time():
                celery.send_task("graphrag.drain", queue="realtime", retry=False, **options)
        except (OperationalError, OSError) as err:
            with contextlib.suppress(GraphRagError):
                coordination.clear_flag(EDITED)
            raise EnqueueFailed(f"broker unavailable: {err.__class__.__name__}") from err

    return drain_in


def recorder(notes: NoteSource, snapshots: SnapshotCache, dirty: DirtyQueue, *, sibling_radius: int,
             debounce_ms: int, drain_in: DrainIn, stages: Histogram | None = None) -> Enqueue:
    """What the event task does (service.events.record_settling), here: the drain is queued for
    when the foci settle. ``stages`` times the resolving (``resolve``)."""
    resolving = _or_unscraped(stages).labels("resolve")

    def record(events: list[dict[str, Any]]) -> None:
        with resolving.time():
            _, settles_s = record_settling(
                [NoteEvent.from_json(e) for e in events], notes, snapshots, dirty,
                sibling_radius=sibling_radius, debounce_ms=debounce_ms, clock_ms=_wall_ms)
        drain_in(settles_s)

    return record


#: The most events a delivery may hold for the webhook to record them itself: one edit is one event
#: (a few, for a move or a delete); a bigger delivery is a batch (a relay catching up, an import),
#: whose resolving would hold its sender for hundreds of milliseconds (200 events: 0.1–0.2 s) and
#: which the worker processes resolve beside the drains instead.
RECORD_AT_MOST = 8


def recording(record: Enqueue, enqueue: Enqueue, *, at_most: int = RECORD_AT_MOST) -> Enqueue:
    """``record`` a delivery of up to ``at_most`` events in this process (resolve, outdate and mark
    dirty the affected foci, queue their drain); a bigger one, or one whose recording fails, is
    handed on with ``enqueue`` (the event task, which retries while the database or Redis is away;
    an outdating ``enqueue`` outdates first). Recording twice is harmless, so a record that failed
    half-way loses nothing."""

    def record_or_enqueue(events: list[dict[str, Any]]) -> None:
        if len(events) > at_most:
            enqueue(events)
            return
        try:
            record(events)
        except (GraphRagError, EnqueueFailed) as err:
            log.warning("could not record %d events here (%s): handed on to the event task",
                        len(events), err)
            enqueue(events)
        except Exception:  # a bug here must not lose the delivery: the event task records it
            log.exception("recording %d events failed: handed on to the event task", len(events))
            enqueue(events)

    return record_or_enqueue
