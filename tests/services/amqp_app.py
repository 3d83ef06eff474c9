# mypy: disable-error-code="no-untyped-call,attr-defined,untyped-decorator"
"""A tiny Celery application on RabbitMQ for the prototype tests (``celery -A tests.services.amqp_app``).

Configured from the environment so that a worker subprocess and the test agree:
``PROTO_AMQP_URL`` (the broker, a private vhost), ``PROTO_QUEUE`` (queue name),
``PROTO_DELIVERY_LIMIT`` (the quorum queue's ``x-delivery-limit``), ``PROTO_EXCHANGE_TYPE``
(``topic``, which Celery's native delayed delivery needs, or ``direct``) and ``PROTO_EVENTS`` (a file
every task execution appends one JSON line to, so the test can count executions across processes).

The delivery settings are the ones the service would run with on RabbitMQ: durable quorum queues,
late acks, requeue on a lost worker process, prefetch 1, publisher confirms. A message delivered
more than the delivery limit allows is dead-lettered by RabbitMQ to ``<queue>.parked`` through the
``<queue>.dlx`` exchange; the worker declares that parking queue at start-up (``worker_init``),
because nothing consumes it and RabbitMQ drops dead letters that no queue is bound for.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from celery import Celery, Task
from celery.exceptions import Reject
from celery.signals import worker_init, worker_ready
from kombu import Exchange, Queue

from worker import broker
from worker.broker import parking_queue

__all__ = ["app", "create_app", "parking_queue", "work_queue"]

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"


def work_queue(name: str, delivery_limit: int, exchange_type: str = "topic") -> Queue:
    """The service's durable quorum queue (:func:`worker.broker.work_queue`), optionally on an
    exchange of another type."""
    queue = broker.work_queue(name, delivery_limit)
    if exchange_type != "topic":
        queue.exchange = Exchange(name, type=exchange_type, durable=True)
    return queue


def create_app(url: str, queue: str, delivery_limit: int, exchange_type: str = "topic") -> Celery:
    """A Celery app whose only queue is ``work_queue(queue, ...)``, with the service's settings."""
    celery = Celery("proto", broker=url, set_as_current=False)
    celery.conf.update(
        task_queues=[work_queue(queue, delivery_limit, exchange_type)],
        task_default_queue=queue, task_default_exchange=queue,
        task_default_exchange_type=exchange_type, task_default_routing_key=queue,
        task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
        broker_transport_options={"confirm_publish": True}, broker_connection_timeout=2,
        broker_connection_retry_on_startup=True, task_serializer="json", accept_content=["json"],
        task_ignore_result=True, worker_hijack_root_logger=False,
    )
    return celery


def _env_app() -> Celery:
    return create_app(os.environ.get("PROTO_AMQP_URL", DEFAULT_URL),
                      os.environ.get("PROTO_QUEUE", "work"),
                      int(os.environ.get("PROTO_DELIVERY_LIMIT", "2")),
                      os.environ.get("PROTO_EXCHANGE_TYPE", "topic"))


app = _env_app()


def _event(kind: str, **fields: Any) -> None:
    path = os.environ.get("PROTO_EVENTS")
    if path:
        line = json.dumps({"event": kind, "pid": os.getpid(), "t_s": time.time(), **fields})
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def _ran(task: Task, token: str) -> None:
    info = task.request.delivery_info or {}
    _event("ran", task=task.name, token=token, redelivered=bool(info.get("redelivered")))


@app.task(name="proto.record", bind=True)
def record(self: Task, token: str, hold_file: str | None = None) -> None:
    """Note the execution; with ``hold_file``, keep the message unacked until that file exists."""
    _ran(self, token)
    deadline = time.monotonic() + 20
    while hold_file and not Path(hold_file).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


@app.task(name="proto.reject", bind=True)
def reject(self: Task, token: str) -> None:
    """A poison message: every delivery is rejected back to the queue."""
    _ran(self, token)
    raise Reject("poison", requeue=True)


@app.task(name="proto.die", bind=True)
def die(self: Task, token: str) -> None:
    """A message that kills the process running it (the pool child, or a solo worker itself)."""
    _ran(self, token)
    os.kill(os.getpid(), signal.SIGKILL)


@worker_init.connect
def _declare_parking(sender: Any = None, **_: Any) -> None:
    with app.connection_for_write() as conn:
        parking_queue(os.environ.get("PROTO_QUEUE", "work")).bind(conn.default_channel).declare()


@worker_ready.connect
def _ready(sender: Any = None, **_: Any) -> None:
    _event("ready")
