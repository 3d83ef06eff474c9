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
  A parking queue keeps at most :data:`PARKED_MAX_LENGTH` messages (the oldest dropped first):
  Celery gives short-lived messages (the sweep's ``expires``) an AMQP expiration, and RabbitMQ
  dead-letters expired messages there too while no worker runs.

Back-pressure reads queue depths through :class:`KombuQueueDepth`, the :class:`service.ports.QueueDepth`
port on either broker (a passive declare: messages *ready*, not those a worker holds unacked).
:func:`check_broker` is the start-up check of ``graphrag worker`` and ``graphrag beat``: one line
naming the broker when it cannot be reached, instead of Celery's endless retries.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from celery import Celery
from kombu.connection import Connection
from kombu.entity import Exchange, Queue
from kombu.exceptions import ChannelError, KombuError
from kombu.utils.url import maybe_sanitize_url

from graphrag.core.errors import GraphRagError

__all__ = ["PARKED_MAX_LENGTH", "QUEUES", "KombuQueueDepth", "broker_conf", "check_broker",
           "declare_parking", "is_amqp", "parking_queue", "work_queue"]

#: parked messages kept per queue (the oldest is dropped beyond it)
PARKED_MAX_LENGTH = 10_000

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
                 durable=True, queue_arguments={"x-queue-type": "quorum",
                                                "x-max-length": PARKED_MAX_LENGTH})


def broker_conf(url: str, *, visibility_timeout_s: int, delivery_limit: int) -> dict[str, Any]:
    """The Celery settings that depend on the broker behind ``url``."""
    if not is_amqp(url):
        return {"broker_transport_options": {"visibility_timeout": visibility_timeout_s}}
    return {
        "task_queues": [work_queue(name, delivery_limit) for name in QUEUES],
        "task_default_exchange": "realtime", "task_default_exchange_type": "topic",
        "task_default_routing_key": "realtime",
        "broker_transport_options": {"confirm_publish": True},
        "worker_detect_quorum_queues": True,  # global QoS off: quorum queues refuse it
    }


def declare_parking(celery: Celery) -> None:
    """Declare the parking queues (RabbitMQ only; idempotent)."""
    if not is_amqp(str(celery.conf.broker_url)):
        return
    with celery.connection_for_write() as conn:
        for name in QUEUES:
            parking_queue(name)(conn.default_channel).declare()  # type: ignore[no-untyped-call]


class KombuQueueDepth:
    """Messages ready on a queue of the Celery broker (0 while the queue does not exist yet)."""

    def __init__(self, celery: Celery) -> None:
        self._celery = celery

    def waiting(self, queue: str) -> int:
        try:
            with self._celery.connection_for_read() as conn:
                declared = conn.default_channel.queue_declare(queue=queue, passive=True)
                return int(declared.message_count)
        except ChannelError:
            return 0


def check_broker(url: str, *, attempts: int = 3) -> None:
    """Connect once (kombu's own retries, ``attempts`` tries about a second apart); a
    :class:`GraphRagError` naming the broker and the cause when it cannot be reached."""
    with Connection(url, connect_timeout=2) as conn:  # type: ignore[no-untyped-call]
        try:
            conn.ensure_connection(max_retries=attempts, interval_start=0.5, interval_step=0.5)
        except (KombuError, *conn.connection_errors, *conn.channel_errors, OSError) as err:
            cause = str(err).strip().splitlines()[0] if str(err).strip() else err.__class__.__name__
            raise GraphRagError(f"CELERY_BROKER_URL: cannot reach the broker at "
                                f"{maybe_sanitize_url(url)} ({cause})") from err
