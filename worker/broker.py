"""The broker half of Celery's configuration: a Redis broker or RabbitMQ, chosen by the URL's scheme.

Both carry the same two queues (``realtime`` for edits, ``bulk`` for full rebuilds) with the same
delivery guarantees above them (late acks, requeue on a lost worker process, prefetch 1: see
:mod:`worker.celery_app`). What differs is below:

* **Redis** (``redis://``): lists; a message a dead worker held comes back after the visibility
  timeout.
* **RabbitMQ** (``amqp://``): durable *quorum* queues (replicated, surviving a broker restart), with
  publisher confirms so that a publish the broker did not take raises at once instead of vanishing.
  A message redelivered more than ``GRAPHRAG_DELIVERY_LIMIT`` times (a poison message that kills its
  worker every time) is dead-lettered by RabbitMQ to ``<queue>.parked`` instead of looping forever;
  the parking queues are declared when a worker starts, because RabbitMQ drops dead letters that no
  queue is bound for. The exchanges are topic exchanges, which Celery's native delayed delivery needs
  for countdowns on quorum queues (the debounced drains); a worker declares that topology too.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from celery import Celery
from kombu.entity import Exchange, Queue

__all__ = ["QUEUES", "broker_conf", "declare_parking", "is_amqp", "parking_queue", "work_queue"]

QUEUES = ("realtime", "bulk")
_AMQP = frozenset({"amqp", "amqps", "pyamqp"})


def is_amqp(url: str) -> bool:
    """Whether ``url`` names a RabbitMQ (AMQP 0-9-1) broker."""
    return urlsplit(url).scheme in _AMQP


def work_queue(name: str, delivery_limit: int) -> Queue:
    """A durable quorum queue that parks a message after ``delivery_limit`` redeliveries."""
    return Queue(  # type: ignore[no-untyped-call]
        name, Exchange(name, type="topic", durable=True),  # type: ignore[no-untyped-call]
        routing_key=name, durable=True,
        queue_arguments={"x-queue-type": "quorum", "x-delivery-limit": delivery_limit,
                         "x-dead-letter-exchange": f"{name}.dlx",
                         "x-dead-letter-routing-key": f"{name}.parked"},
    )


def parking_queue(name: str) -> Queue:
    """Where RabbitMQ dead-letters ``name``'s poison messages (nothing consumes it: an operator
    inspects it, see ops/runbook.md)."""
    dlx = Exchange(f"{name}.dlx", type="direct", durable=True)  # type: ignore[no-untyped-call]
    return Queue(f"{name}.parked", dlx, routing_key=f"{name}.parked",  # type: ignore[no-untyped-call]
                 durable=True, queue_arguments={"x-queue-type": "quorum"})


def broker_conf(url: str, *, visibility_timeout_s: int, delivery_limit: int) -> dict[str, Any]:
    """The Celery settings that depend on the broker behind ``url``."""
    if not is_amqp(url):
        return {"broker_transport_options": {"visibility_timeout": visibility_timeout_s}}
    return {
        "task_queues": [work_queue(name, delivery_limit) for name in QUEUES],
        "task_default_exchange": "realtime", "task_default_exchange_type": "topic",
        "task_default_routing_key": "realtime",
        "broker_transport_options": {"confirm_publish": True},
    }


def declare_parking(celery: Celery) -> None:
    """Declare the parking queues (RabbitMQ only; idempotent)."""
    if not is_amqp(str(celery.conf.broker_url)):
        return
    with celery.connection_for_write() as conn:
        for name in QUEUES:
            parking_queue(name)(conn.default_channel).declare()  # type: ignore[no-untyped-call]
