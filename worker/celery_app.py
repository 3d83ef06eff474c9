"""The Celery application factory (the entry module is :mod:`worker.app`).

Delivery settings follow docs/architecture.md ("Delivery"): late acks, requeue on a lost worker
process, prefetch 1, time limits well below the broker's visibility timeout, JSON only, no result
backend, two queues.
Beat runs RedBeat (a Redis lock makes it single-instance, lock timeout 90 s) with the nightly full
rebuild at ``GRAPHRAG_NIGHTLY_HOUR_UTC`` (expiring before the next run) and a dirty-set sweep.
Clients are created per process after fork (``tasks.runtime``).
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Iterable
from typing import Any

from celery import Celery
from celery.schedules import crontab
from celery.signals import worker_init, worker_process_init, worker_ready
from kombu.exceptions import OperationalError

from service.events import sibling_radius
from service.ports import QueueDepth
from service.rebuild import RebuildReport
from tasks.jobs import sweep
from tasks.runtime import Runtime, configure, current
from worker.broker import KombuQueueDepth, broker_conf, declare_parking, is_amqp
from worker.compose import Wiring, wall_ms
from worker.idle import IdleRelease
from worker.settings import Settings

__all__ = ["build_runtime", "create_celery", "queue_size"]

log = logging.getLogger("graphrag.worker")


def create_celery(settings: Settings, *, redis_client: Any = None) -> Celery:
    """A configured Celery app whose tasks build their runtime from ``settings`` (and
    ``redis_client`` for the cache when given: the demo's in-process Redis)."""
    celery = Celery("graphrag", broker=settings.broker_url, include=["tasks.jobs"])
    limit = settings.task_time_limit_s
    celery.conf.update(
        task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
        task_default_queue="realtime", task_time_limit=limit,
        task_soft_time_limit=limit - min(30, limit // 5),
        task_routes={"graphrag.nightly_dispatch": {"queue": "bulk"},
                     "graphrag.rebuild_batch": {"queue": "bulk"},
                     "graphrag.rebuild_piece": {"queue": "bulk"}},
        task_serializer="json", accept_content=["json"], task_ignore_result=True,
        broker_connection_timeout=2, broker_connection_retry_on_startup=True,
        timezone="UTC", enable_utc=True,
        beat_scheduler="redbeat.RedBeatScheduler", redbeat_redis_url=settings.redis_url,
        redbeat_redis_options={"socket_timeout": 5, "socket_connect_timeout": 5,
                               **({"cluster": True} if settings.redis_cluster else {})},
        redbeat_key_prefix=f"{settings.redis_prefix}:redbeat", redbeat_lock_timeout=90,
        beat_schedule=_schedule(settings),
        **broker_conf(settings.broker_url, visibility_timeout_s=settings.visibility_timeout_s,
                      delivery_limit=settings.delivery_limit),
    )
    configure(lambda: build_runtime(settings, celery, redis_client=redis_client))
    return celery


def _schedule(settings: Settings) -> dict[str, dict[str, object]]:
    return {
        "nightly-rebuild": {
            "task": "graphrag.nightly_dispatch",
            "schedule": crontab(hour=settings.nightly_hour_utc, minute=0),
            "options": {"queue": "bulk", "expires": 23 * 3600},
        },
        "sweep-dirty": {"task": "graphrag.sweep", "schedule": 15.0, "options": {"expires": 14}},
    }


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
    is let go once too old to use (worker.idle)."""
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
        debounce_ms=settings.debounce_ms, max_bulk_backlog=settings.max_bulk_backlog,
        rebuild_page=settings.rebuild_page, rebuild_piece_notes=settings.rebuild_piece_notes,
        subsecond_countdowns=not is_amqp(settings.broker_url),
    )


@worker_process_init.connect
def _warm_up(**_: object) -> None:
    """Build the runtime (engine, Redis client, tiktoken's encoding) before the first task, then
    freeze what the process holds by now: it lives as long as the process, and the cycle
    collector's full passes (~50 ms each over a worker's ~80,000 startup objects) skip it."""
    try:
        current()
    except Exception as err:  # it resurfaces, with retries, in the first task that needs it
        log.warning("worker runtime not ready yet: %s", err)
    gc.freeze()


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
