"""Single-edit invalidation with RabbitMQ as the broker, side by side with Redis in the same run.

The measurement is :func:`ops.bench.invalidation.single_edits` (a title edit in the database, a
signed webhook to ``graphrag serve``, a real Celery worker of two processes, time until the watched
snapshot shows the new title), run twice on the same graph and snapshots, one broker after the
other: first a claimed Redis database, then RabbitMQ in a private vhost (durable quorum queues,
publisher confirms, the delivery limit: everything ``CELERY_BROKER_URL=amqp://`` configures). Each
broker gets its own edits, so neither waits for the other's rebuilds. The vhost is created and
deleted with ``rabbitmqctl`` (the test suite's helper, ``tests.services.rabbitmq``; its
``GRAPHRAG_TEST_AMQP_URL`` names another broker). "Idle" on RabbitMQ is "no message ready on either
queue": a passive declare cannot see messages a worker holds unacknowledged, and the measurement
does not need it (it waits for the snapshot itself).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from kombu.connection import Connection

from ops.bench.graph import Graph
from ops.bench.invalidation import edit_pairs, restore_titles, single_edits
from ops.bench.plan import WARMUP_EDITS, Bench, BenchError, say
from ops.bench.services import QUEUES, Broker, redis_broker, services

__all__ = ["rabbitmq_broker", "rabbitmq_section"]


def _ready_messages(url: str) -> int:
    with Connection(url, connect_timeout=2) as conn:  # type: ignore[no-untyped-call]
        channel = conn.default_channel
        return sum(int(channel.queue_declare(queue=q, passive=True).message_count) for q in QUEUES)


@contextlib.contextmanager
def rabbitmq_broker() -> Iterator[tuple[str, Callable[[], bool]]]:
    """A private vhost on the local RabbitMQ, deleted afterwards."""
    from tests.services import ServiceUnavailable
    from tests.services.rabbitmq import rabbitmq_vhost

    try:
        with rabbitmq_vhost() as url:
            yield url, lambda: _ready_messages(url) == 0
    except ServiceUnavailable as err:
        raise BenchError(str(err)) from err


def _edits_with(bench: Bench, graph: Graph, broker: Broker, pairs: list[tuple[int, int]],
                samples: str) -> dict[str, Any]:
    with services(bench, graph, broker) as svc, httpx.Client(base_url=svc.base_url, timeout=10) as http:
        return single_edits(bench, graph, svc, pairs, http, samples)


def rabbitmq_section(bench: Bench, graph: Graph, foci: list[int]) -> dict[str, Any]:
    """RabbitMQ's single-edit figures, with Redis's of the same run as ``redis_*``."""
    per_broker = WARMUP_EDITS + bench.plan.edits
    pairs = edit_pairs(bench, graph, foci, 2 * per_broker)
    if len(pairs) < 2 * per_broker:
        raise BenchError(f"only {len(pairs)} edit pairs for {2 * per_broker} edits")
    try:
        say("single edits with the Redis broker")
        redis = _edits_with(bench, graph, redis_broker(bench), pairs[:per_broker],
                            "invalidation_redis_ms")
        say("single edits with the RabbitMQ broker")
        rabbit = _edits_with(bench, graph, rabbitmq_broker(), pairs[per_broker:],
                             "invalidation_rabbitmq_ms")
    finally:
        restore_titles(graph)
    return {**rabbit, "broker": "rabbitmq",
            **{f"redis_{key}": redis[key] for key in ("p50_ms", "p95_ms", "max_ms", "timeouts")}}
