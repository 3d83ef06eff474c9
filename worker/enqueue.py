"""Handing note events on to the workers: what the HTTP process's webhook and change capture share.

Both inputs end in the same call: a list of events in the webhook's JSON shape becomes one
``graphrag.process_events`` task on the ``realtime`` queue (:func:`celery_enqueuer`), sent by name,
so neither process needs the tasks' code or a worker's runtime. Invariants:

* **A message the broker did not take is an error, never silence.** Sending does not retry and any
  broker or socket error becomes :class:`EnqueueFailed`: the webhook answers 503 (its sender
  retries), change capture does not store the position after the transaction (it reads it again).
* **No read serves an edited note's old text once an input has handed its event on.**
  :func:`outdating` outdates, with Redis alone, every snapshot that shows a note the events name
  before it enqueues, so the outdating can never land after a worker took the event's foci.
* **Every message says when it was sent** (header ``tasks.message.SENT_HEADER``, wall-clock
  ms), so the worker can time its delivery. With
  ``stages`` (service.metrics.edit_stages) the outdating and the sending are timed too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from celery import Celery
from kombu.exceptions import OperationalError
from prometheus_client import CollectorRegistry, Histogram

from service.metrics import edit_stages
from tasks.message import SENT_HEADER

__all__ = ["Enqueue", "EnqueueFailed", "celery_enqueuer", "outdating", "warm_sender"]

log = logging.getLogger("graphrag.server")
#: Hands a delivery's events on to the event task (raises EnqueueFailed when it cannot).
Enqueue = Callable[[list[dict[str, Any]]], None]


class EnqueueFailed(Exception):
    """The broker did not take the message."""


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
                                 headers={SENT_HEADER: time.time_ns() // 1_000_000}, retry=False)
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
