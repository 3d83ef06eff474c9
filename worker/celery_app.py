"""The Celery application as every process sees it: :func:`create_celery`.

Every process that talks to the broker builds its app here: the workers and beat (through
:func:`worker.celery.runtime.worker_app`, which adds the tasks' runtime; ``celery -A
worker.celery.app``), and the processes that only send tasks (the HTTP process's webhook, change
capture, ``graphrag rebuild --all --queue``). So a sender and a worker agree on everything a message
depends on: task names and routes, the queues and their broker settings (:mod:`worker.broker`), the
serializer. Building the app configures nothing else: no runtime, no signal handler, no client.

Delivery settings follow docs/architecture.md ("Delivery"): late acks, requeue on a lost worker
process, prefetch 1, time limits well below the broker's visibility timeout, JSON only, no result
backend, two queues.
Beat runs RedBeat (a Redis lock makes it single-instance, lock timeout 90 s) with the nightly full
rebuild at ``GRAPHRAG_NIGHTLY_HOUR_UTC`` (expiring before the next run) and a dirty-set sweep.
"""

from __future__ import annotations

from celery import Celery
from celery.schedules import crontab

from worker.broker import broker_conf
from worker.settings import Settings

__all__ = ["create_celery"]


def create_celery(settings: Settings) -> Celery:
    """The Celery app configured from ``settings``, as every process sees it; a worker's tasks also
    need their runtime (:func:`worker.celery.runtime.worker_app`)."""
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
