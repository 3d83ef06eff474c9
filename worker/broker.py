# mypy: disable-error-code="no-untyped-call"
"""The Celery broker: Redis or RabbitMQ, chosen by the scheme of ``CELERY_BROKER_URL``.

Both carry the same two queues (``realtime``, ``bulk``) with the same delivery guarantees (late acks,
requeue on a lost worker process, prefetch 1); what differs is only how the broker keeps them:

* **Redis** (``redis://``, ``rediss://``): kombu's lists; an unacknowledged message comes back after
  the visibility timeout; Redis counts no deliveries, so nothing is parked.
* **RabbitMQ** (``amqp://``, ``amqps://``): durable *quorum* queues (replicated, fsynced before the
  publisher is confirmed), publisher confirms (a publish the broker did not take raises at once, so
  the webhook answers 503 and Doughnut retries), and a *delivery limit*: a message delivered more
  than ``GRAPHRAG_DELIVERY_LIMIT`` times without an ack (it crashed its worker process, or was
  rejected) is dead-lettered by RabbitMQ to ``<queue>.parked`` instead of looping for ever. Nothing
  consumes a parking queue; it is declared by every worker at start, because RabbitMQ drops a dead
  letter that no queue is bound for. Its length is capped (oldest dropped first): Celery gives
  short-lived messages (the sweep's ``expires``) an AMQP expiration, and RabbitMQ dead-letters
  expired messages too. The queue arguments are fixed when a queue is first declared: a worker
  started with another delivery limit is refused by RabbitMQ (``PRECONDITION_FAILED``); change it
  with a RabbitMQ policy or by deleting the (drained) queues.

Delays on RabbitMQ: with quorum queues Celery delays a countdown in the broker (its
``celery_delayed_*`` topology, which each worker declares; hence topic exchanges) in *whole seconds*
only, and refuses a countdown under one second: the runtime's ``whole_second_delays`` tells the tasks
(``tasks.jobs.delay_options``) to send a sub-second delay at once and wait it in the task instead.

Back-pressure: :class:`KombuQueueDepth` is the :class:`service.ports.QueueDepth` port on either
broker, through kombu (a passive queue declare: messages *ready*, i.e. not delivered to a worker).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from celery import Celery
from kombu.connection import Connection
from kombu.entity import Exchange, Queue
from kombu.exceptions import ChannelError, KombuError
from kombu.utils.url import maybe_sanitize_url

from graphrag.errors import GraphRagError

__all__ = [
    "AMQP_SCHEMES", "PARKED_MAX_LENGTH", "QUEUES", "KombuQueueDepth", "broker_conf", "check_broker",
    "declare_parking", "is_amqp", "parking_queue", "work_queue",
]

QUEUES = ("realtime", "bulk")
AMQP_SCHEMES = ("amqp", "amqps", "pyamqp")
#: parked messages kept per queue (the oldest is dropped beyond it)
PARKED_MAX_LENGTH = 10_000


def is_amqp(url: str) -> bool:
    """True for a RabbitMQ (AMQP 0-9-1) broker URL."""
    return urlsplit(url).scheme in AMQP_SCHEMES


def work_queue(name: str, delivery_limit: int) -> Queue:
    """A durable quorum queue on a topic exchange of its own, parking after ``delivery_limit``."""
    return Queue(
        name, Exchange(name, type="topic", durable=True), routing_key=name, durable=True,
        queue_arguments={
            "x-queue-type": "quorum",
            "x-delivery-limit": delivery_limit,
            "x-dead-letter-exchange": f"{name}.dlx",
            "x-dead-letter-routing-key": f"{name}.parked",
        },
    )


def parking_queue(name: str) -> Queue:
    """Where RabbitMQ dead-letters ``name``'s poison messages (nobody consumes it)."""
    return Queue(f"{name}.parked", Exchange(f"{name}.dlx", type="direct", durable=True),
                 routing_key=f"{name}.parked", durable=True,
                 queue_arguments={"x-queue-type": "quorum", "x-max-length": PARKED_MAX_LENGTH})


def broker_conf(url: str, *, delivery_limit: int, visibility_timeout_s: int) -> dict[str, Any]:
    """The Celery settings that depend on the broker (see the module docstring)."""
    if not is_amqp(url):
        return {"broker_transport_options": {"visibility_timeout": visibility_timeout_s}}
    return {
        "task_queues": [work_queue(q, delivery_limit) for q in QUEUES],
        "task_default_exchange": "realtime", "task_default_exchange_type": "topic",
        "task_default_routing_key": "realtime", "task_create_missing_queues": False,
        "broker_transport_options": {"confirm_publish": True},
        "worker_detect_quorum_queues": True,  # global QoS off: quorum queues refuse it
    }


def declare_parking(celery: Celery) -> None:
    """Declare the parking queues (RabbitMQ only; a worker does it at start)."""
    if is_amqp(str(celery.conf.broker_url)):
        with celery.connection_for_write() as conn:
            for name in QUEUES:
                parking_queue(name).bind(conn.default_channel).declare()


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
    with Connection(url, connect_timeout=2) as conn:
        try:
            conn.ensure_connection(max_retries=attempts, interval_start=0.5, interval_step=0.5)
        except (KombuError, *conn.connection_errors, *conn.channel_errors, OSError) as err:
            cause = str(err).strip().splitlines()[0] if str(err).strip() else err.__class__.__name__
            raise GraphRagError(f"CELERY_BROKER_URL: cannot reach the broker at "
                                f"{maybe_sanitize_url(url)} ({cause})") from err
