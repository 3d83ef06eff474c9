"""Which engines a reliability stack runs on: one Redis for everything, or the scaled-out deployment.

``single``: snapshots under a unique prefix of the shared Redis, the broker in a claimed database of
the same server (kombu's Redis transport), as the default docker-compose deployment.

``scaled``: snapshots, dirty-set shards and locks on the test process's local 3-primary Redis
Cluster (``GRAPHRAG_REDIS_CLUSTER=true``, the URL of one node) and Celery on RabbitMQ (durable
quorum queues in a private vhost), as the runbook's "Scaling out" deploys several worker hosts.

Both are read through the same small broker interface (:class:`BrokerLook`): how many messages are
waiting or held by a worker, and which a killed worker stranded. On RabbitMQ a killed worker's
connection closes and the broker requeues what it held at once, so nothing is ever stranded there;
a message parked by the delivery limit (``<queue>.parked``) is counted as undeliverable, which the
suites assert to be none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from tests.e2e.conftest import broker_database, connect, redis_url
from tests.services.rabbitmq import list_queues, rabbitmq_vhost
from tests.services.redis_cluster import shared_cluster

__all__ = ["ENGINES", "AmqpLook", "BrokerLook", "Engines", "Stranded", "engines"]

ENGINES = ("single", "scaled")


@dataclass(frozen=True)
class Stranded:
    task: str
    delivered_at: float  # epoch seconds


class BrokerLook(Protocol):
    def queued(self) -> int: ...
    def undeliverable(self) -> int: ...
    def unacked(self) -> list[Stranded]: ...
    def backlog(self) -> int: ...


@dataclass(frozen=True)
class Engines:
    """Where the snapshots live (``redis_env``: URL and cluster flag) and the broker's URL."""

    name: str
    redis_env: dict[str, str]
    broker_url: str


class AmqpLook:
    """Message counts of every queue of a private vhost (``rabbitmqctl list_queues``: ready and
    unacknowledged together), Celery's delayed-delivery queues included."""

    def __init__(self, broker_url: str) -> None:
        self.broker_url = broker_url

    def _counts(self) -> dict[str, int]:
        return {name: int(row[0]) for name, row in list_queues(self.broker_url, "messages").items()}

    def queued(self) -> int:
        return sum(n for name, n in self._counts().items() if not name.endswith(".parked"))

    def undeliverable(self) -> int:
        return sum(n for name, n in self._counts().items() if name.endswith(".parked"))

    def unacked(self) -> list[Stranded]:
        return []  # requeued by the broker as soon as the holder's connection closes

    def backlog(self) -> int:
        return self.queued()


@contextlib.contextmanager
def engines(name: str) -> Iterator[Engines]:
    """The engines ``name`` (one of :data:`ENGINES`) stands for, reachable, cleaned up on exit."""
    if name == "single":
        base = redis_url()
        connect(base, "the snapshot store").close()
        with broker_database(base) as broker_url:
            yield Engines(name, {"GRAPHRAG_REDIS_URL": base}, broker_url)
        return
    if name != "scaled":
        raise ValueError(f"engines must be one of {ENGINES}, got {name!r}")
    cluster = shared_cluster()
    with rabbitmq_vhost() as broker_url:
        yield Engines(name, {"GRAPHRAG_REDIS_URL": cluster.startup_url,
                             "GRAPHRAG_REDIS_CLUSTER": "true"}, broker_url)

