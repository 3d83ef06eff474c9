# mypy: disable-error-code="no-untyped-call"
"""The service on RabbitMQ (issue 15): what the Redis broker cannot do, proved with real processes.

A worker of the service's own Celery app (``tests.e2e.poison_app``: ``worker.celery.app`` plus a task
that SIGKILLs its process) runs in a private vhost with ``GRAPHRAG_DELIVERY_LIMIT=1``:

* a message that kills its worker process is delivered ``limit + 1`` times, each to a fresh pool
  child, then RabbitMQ dead-letters it to ``realtime.parked`` (``x-death`` reason
  ``delivery_limit``) and the worker goes on with other work: it does not loop for ever;
* the nightly dispatcher's back-pressure (the runtime's ``bulk_backlog``, through
  :class:`worker.broker.KombuQueueDepth`) reads the ``bulk`` queue's depth on RabbitMQ: messages
  ready and not yet delivered (this worker consumes ``realtime`` only, so they wait).

The rest of the service on RabbitMQ (edits, quorum queues, a refused message parked, the nightly
rebuild): ``test_worker_rabbitmq.py``, and every test of ``test_worker_e2e.py`` on both brokers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from kombu.connection import Connection

from storage.database import open_engine
from storage.profiles.admin_2025 import create_tables
from storage.redis.client import delete_prefix
from tests.e2e.conftest import Worker, connect, redis_url, wait_until, worker_env
from tests.services.plugin import entered
from tests.services.rabbitmq import rabbitmq_vhost
from worker.broker import KombuQueueDepth, parking_queue
from worker.celery.runtime import build_runtime
from worker.celery_app import create_celery
from worker.settings import Settings, load_settings

pytestmark = [pytest.mark.rabbitmq, pytest.mark.redis]

LIMIT = 1


@pytest.fixture(scope="module")
def amqp_url() -> Iterator[str]:
    yield from entered(rabbitmq_vhost)


@pytest.fixture(scope="module")
def env(amqp_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The settings; what the worker left under the key prefix (its binding) goes afterwards."""
    folder = tmp_path_factory.mktemp("rabbitmq")
    engine = open_engine(f"sqlite:///{folder / 'empty.db'}")  # the sweep's runtime opens it
    create_tables(engine)
    engine.dispose()
    prefix = f"graphrag-e2e:{uuid.uuid4().hex}:v1"
    yield {"CELERY_BROKER_URL": amqp_url, "GRAPHRAG_DELIVERY_LIMIT": str(LIMIT),
           "GRAPHRAG_DATABASE_URL": f"sqlite:///{folder / 'empty.db'}",
           "GRAPHRAG_REDIS_PREFIX": prefix}
    client = connect(redis_url(), "the snapshot store")
    delete_prefix(client, prefix)
    client.close()


@pytest.fixture(scope="module")
def settings(env: dict[str, str]) -> Iterator[Settings]:
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        yield load_settings()


@pytest.fixture(scope="module")
def celery(settings: Settings) -> Celery:
    return create_celery(settings)


@pytest.fixture(scope="module")
def worker(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """One worker process with one pool child, consuming ``realtime`` only."""
    log = tmp_path_factory.mktemp("rabbitmq-worker") / "worker.log"
    started = Worker(worker_env(env), log, concurrency=1, app="tests.e2e.poison_app",
                     queues="realtime")
    try:
        yield started.start()
    finally:
        started.stop()


def parked(url: str, queue: str, task_id: str) -> dict[str, Any] | None:
    """The headers of the parked message of ``task_id`` (taken off the parking queue), or None."""
    with Connection(url) as conn:
        bound = parking_queue(queue).bind(conn.default_channel)
        while (message := bound.get(no_ack=False)) is not None:
            if message.headers.get("id") == task_id:
                message.ack()
                return dict(message.headers)
            message.requeue()
            return None
    return None


def await_parked(url: str, queue: str, task_id: str, what: str, log: Worker) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    def check() -> bool:
        headers = parked(url, queue, task_id)
        if headers is not None:
            found.append(headers)
        return bool(found)

    wait_until(check, timeout_s=60, what=what, details=log.tail, interval_s=0.1)
    return found[0]


def test_a_message_that_kills_its_worker_is_parked_after_the_delivery_limit(
        amqp_url: str, celery: Celery, worker: Worker, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    result = celery.send_task("graphrag.test.die", args=[str(runs)], queue="realtime")
    death = await_parked(amqp_url, "realtime", result.id, "the poison message is parked",
                         worker)["x-death"][0]
    assert (death["reason"], death["queue"], death["count"]) == ("delivery_limit", "realtime", 1)
    pids = runs.read_text().split()
    assert len(pids) == LIMIT + 1 and len(set(pids)) == LIMIT + 1  # a fresh pool child each time
    assert worker.proc is not None and worker.proc.poll() is None  # the worker itself lives on
    # and it goes on with other work
    done = worker.count(r"graphrag\.sweep\[[^\]]+\] succeeded")
    celery.send_task("graphrag.sweep", queue="realtime")
    wait_until(lambda: worker.count(r"graphrag\.sweep\[[^\]]+\] succeeded") > done, timeout_s=30,
               what="a task after the poison message", details=worker.tail)


def test_back_pressure_reads_the_depth_of_the_bulk_queue(
        settings: Settings, celery: Celery, worker: Worker) -> None:
    backlog = build_runtime(settings, celery).bulk_backlog
    assert KombuQueueDepth(celery).waiting("no-such-queue") == 0
    before = backlog()
    for n in range(5):
        celery.send_task("graphrag.rebuild_batch", args=["run", [n]], queue="bulk")
    assert backlog() == before + 5  # confirmed publishes: counted as soon as send_task returns
    with Connection(settings.broker_url) as conn:
        conn.default_channel.queue_purge("bulk")
    assert backlog() == 0
