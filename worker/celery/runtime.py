"""What a Celery worker process holds beyond the app every process sees: the tasks' runtime.

:func:`worker.celery_app.create_celery` builds the app as every process sees it, the senders too
(the HTTP process's webhook, change capture, ``graphrag rebuild --all --queue``); none of those run
a task, so none of them registers a runtime. :func:`worker_app` is that app with the runtime
registered (``tasks.runtime.configure``): what ``celery -A worker.celery.app`` and ``graphrag
worker|beat`` start, and what a test or the demo runs a worker from. Invariants:

* **A worker's tasks always find their runtime.** Every way to start one goes through
  :func:`worker_app`; a task in a process that did not is refused at its first ``current()``.
* **Clients are never shared across a fork.** The runtime is built lazily in each process
  (``tasks.runtime.current``), warmed up in ``worker_process_init`` after the fork, then frozen
  (``gc.freeze``) so the collector's full passes skip what lives as long as the process.
* **Carried memory is let go when it cannot be used** (:class:`worker.celery.idle.IdleRelease`): a
  drain's carry after ``GRAPHRAG_CARRY_AGE_MS`` idle, a full rebuild's workspace after a drain and
  after ``GRAPHRAG_PIECE_CARRY_IDLE_S`` idle.
* **Nothing is left behind by a crash.** On RabbitMQ the parking queues exist before the first
  message could be parked (``worker_init``), and a worker that starts sweeps the dirty set
  (``worker_ready``). The signal handlers are connected when this module is imported, which every
  worker process does through :func:`worker_app`.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from celery import Celery, current_app
from celery.signals import worker_init, worker_process_init, worker_ready
from kombu.exceptions import OperationalError

from service.binding import PrefixOfAnotherDatabase
from service.events import sibling_radius
from service.ports import QueueDepth
from service.rebuild import RebuildReport
from tasks.jobs import sweep
from tasks.runtime import Runtime, configure, current
from worker.broker import KombuQueueDepth, declare_parking, is_amqp
from worker.celery.idle import IdleRelease
from worker.celery_app import create_celery
from worker.compose import Wiring, wall_ms
from worker.enqueue import warm_sender
from worker.settings import Settings

__all__ = ["build_runtime", "queue_size", "runtime_of", "worker_app"]

log = logging.getLogger("graphrag.worker")


def worker_app(settings: Settings, *, redis_client: Any = None) -> Celery:
    """The Celery app of a worker or beat process: :func:`worker.celery_app.create_celery` whose
    tasks build their runtime from ``settings`` (and ``redis_client`` for the cache when given: the
    demo's in-process Redis)."""
    celery = create_celery(settings)
    configure(lambda: build_runtime(settings, celery, redis_client=redis_client))
    _BINDING_CHECKS[celery] = lambda: _check_binding_once(settings, redis_client)
    return celery


#: what a worker checks as it starts (``worker_init``), per app: the prefix's database
_BINDING_CHECKS: weakref.WeakKeyDictionary[Celery, Callable[[], None]] = weakref.WeakKeyDictionary()


def _check_binding_once(settings: Settings, redis_client: Any) -> None:
    wiring = Wiring(settings, redis_client=redis_client)
    try:
        wiring.check_binding()
    finally:
        wiring.close()  # the pool processes build their own after the fork


def queue_size(celery: Celery, queue: str) -> int:
    """Messages waiting in ``queue`` (0 when it does not exist yet), on either broker."""
    queues: QueueDepth = KombuQueueDepth(celery)
    return queues.waiting(queue)


def build_runtime(settings: Settings, celery: Celery, *, redis_client: Any = None) -> Runtime:
    """Everything the tasks of one worker process use, wired from ``settings``."""
    return runtime_of(Wiring(settings, redis_client=redis_client), celery)


def runtime_of(wiring: Wiring, celery: Celery) -> Runtime:
    """The runtime over ``wiring``: drains carry loaded data from call to call (service.carry);
    full-rebuild pieces carry their workspace, let go after a drain and when idle, and a drain's
    is let go once too old to use (worker.celery.idle)."""
    settings, drains = wiring.settings, wiring.drains
    idle = IdleRelease(wiring.pieces, settings.piece_carry_idle_s)
    drains_idle = IdleRelease(drains, settings.carry_age_ms / 1000)

    def rebuild(note_ids: Iterable[int], **options: Any) -> RebuildReport:
        # an event moved the edit seq before this drain: the next piece could not use what the
        # last one carried, so its memory is let go now rather than then
        wiring.pieces.release()
        with drains_idle.in_use():
            return wiring.rebuild(note_ids, carry=drains, **options)

    def rebuild_piece(note_ids: list[int], **options: Any) -> RebuildReport:
        with idle.in_use():
            return wiring.rebuild_piece(note_ids, **options)

    return Runtime(
        notes=wiring.source, snapshots=wiring.cache, dirty=wiring.dirty,
        coordination=wiring.coordination, progress=wiring.progress(),
        rebuild=rebuild, rebuild_piece=rebuild_piece, clock_ms=wall_ms,
        bulk_backlog=lambda: queue_size(celery, "bulk"),
        sibling_radius=sibling_radius(wiring.strategies()),
        debounce_ms=settings.debounce_ms, drain_batch=settings.drain_batch,
        drain_budget_s=settings.drain_budget_ms / 1000, max_bulk_backlog=settings.max_bulk_backlog,
        rebuild_page=settings.rebuild_page, rebuild_piece_notes=settings.rebuild_piece_notes,
        subsecond_countdowns=not is_amqp(settings.broker_url), rehearse=wiring.rehearse,
    )


@worker_process_init.connect
def _warm_up(**_: object) -> None:
    """Build the runtime (engine, Redis client, tiktoken's encoding) and rehearse a rebuild (the
    first connections, the cache's scripts, one computation's statements; nothing written) before
    the first task, open this process's broker connection for the drains it queues
    (worker.enqueue.warm_sender), then freeze what the process holds by now: it lives as long as
    the process, and the cycle collector's full passes (~50 ms each over a worker's ~80,000
    startup objects) skip it."""
    try:
        current().rehearse()
    except Exception as err:  # it resurfaces, with retries, in the first task that needs it
        log.warning("worker runtime not ready yet: %s", err)
    warm_sender(current_app)  # (the drains its tasks queue: this process's own connection)
    gc.collect()  # (the rehearsal's garbage goes now; what is left is kept for good)
    gc.freeze()


@worker_init.connect
def _refuse_another_databases_prefix(sender: Any = None, **_: object) -> None:
    """A worker whose key prefix holds another database's snapshots does not start (one line);
    SystemExit, since Celery logs and ignores a signal handler's exceptions."""
    app = getattr(sender, "app", None)
    check = None if app is None else _BINDING_CHECKS.get(app)
    if check is None:
        return
    try:
        check()
    except PrefixOfAnotherDatabase as err:
        log.error("%s", err)
        raise SystemExit(2) from err


@worker_init.connect
def _declare_parking(sender: Any = None, **_: object) -> None:
    """On RabbitMQ, the parking queues exist before the first message could be parked."""
    app = getattr(sender, "app", None)
    if app is not None and app.main == "graphrag":
        declare_parking(app)


@worker_ready.connect
def _drain_leftovers(sender: object = None, **_: object) -> None:
    """A worker that starts after a crash picks up whatever was left dirty."""
    with contextlib.suppress(OperationalError):  # no broker: the beat sweep will do it
        sweep.apply_async(countdown=3)  # after a dead worker's 2 s drain flag has expired
