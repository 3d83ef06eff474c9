"""The service on RabbitMQ: real worker processes consume durable quorum queues in a private vhost.

The same wiring as on Redis (``CELERY_BROKER_URL=amqp://...``): a note edited in MariaDB and announced
by a signed webhook reaches its snapshots through the webhook's recording (worker.enqueue.recording)
and a debounced ``drain`` (under a second, a wait the task spends: tasks.message); a full rebuild
goes through the bulk queue with back-pressure reading the AMQP queue depth; the queues are quorum
queues with the configured delivery limit, and a message the worker cannot take is parked in
``<queue>.parked``, not lost and not looping. The delivery-limit mechanics themselves (a message
that kills its worker is parked after the limit) are shown with real workers in
``tests/services/test_prototypes_amqp.py``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient
from kombu import Connection
from sqlalchemy import text
from sqlalchemy.engine import Engine

from service.decoding import decode_envelope
from service.envelope import SnapshotKey
from storage.database import open_engine
from storage.profiles.admin_2025 import create_tables, insert_notes
from tests.conftest import mariadb_database, url_string
from tests.e2e.conftest import FIGURES, LATENCIES, Workers, connect, redis_url, wait_until, worker_env
from tests.e2e.worker_system import hand_graph
from tests.reliability.harness import SECRET, TOKEN, now_iso, post_events, settings_from
from tests.reliability.support import graphrag
from tests.services.rabbitmq import list_queues
from worker.celery.runtime import queue_size
from worker.celery_app import create_celery
from worker.compose import Wiring
from worker.http.server import build_http_app

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

DELIVERY_LIMIT = 3


@dataclass
class Site:
    wiring: Wiring
    engine: Engine
    http: TestClient
    workers: Workers
    broker_url: str

    def envelope(self, note_id: int) -> object:
        return decode_envelope(self.wiring.cache.read(SnapshotKey(note_id, "wavefront", 0)))

    def tail(self) -> str:
        return self.workers.current.tail()


@pytest.fixture(scope="module")
def site(rabbitmq_module_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = redis_url()
    connect(base, "the snapshot store").close()
    with mariadb_database() as db_url:
        database_url = url_string(db_url)
        engine = open_engine(database_url)
        create_tables(engine)
        insert_notes(engine, hand_graph().records())
        prefix = f"graphrag-amqp:{uuid.uuid4().hex}:v1"
        env = {"GRAPHRAG_DATABASE_URL": database_url, "GRAPHRAG_REDIS_URL": base,
               "GRAPHRAG_REDIS_PREFIX": prefix, "CELERY_BROKER_URL": rabbitmq_module_url,
               "GRAPHRAG_WEBHOOK_SECRET": SECRET, "GRAPHRAG_READER_TOKEN": TOKEN,
               "GRAPHRAG_STRATEGIES": "wavefront", "GRAPHRAG_SEEDS": "0",
               "GRAPHRAG_DELIVERY_LIMIT": str(DELIVERY_LIMIT), "GRAPHRAG_MAX_BULK_BACKLOG": "1",
               "GRAPHRAG_REBUILD_PAGE": "10"}
        settings = settings_from(env)
        wiring = Wiring(settings)
        workers = Workers(worker_env(env), tmp_path_factory.mktemp("amqp-workers"))
        try:
            assert wiring.rebuild(wiring.source.live_ids_after(0, 10**6)).errors == {}
            workers.start()
            with TestClient(build_http_app(settings), raise_server_exceptions=False) as http:
                yield Site(wiring, engine, http, workers, rabbitmq_module_url)
        finally:
            workers.stop_all()
            for key in wiring.client.scan_iter(match=f"{prefix}:*", count=1000):
                wiring.client.delete(key)
            wiring.client.close()
            wiring.source.engine.dispose()  # type: ignore[attr-defined]
            engine.dispose()


def _queues(url: str) -> dict[str, list[str]]:
    return list_queues(url, "type", "durable", "arguments")


def test_an_edit_reaches_its_snapshot_through_rabbitmq(site: Site) -> None:
    with site.engine.begin() as conn:
        conn.execute(text("UPDATE note SET topic_constructor = 'Edited over AMQP' WHERE id = 12"))
    started = time.perf_counter()
    event = {"type": "note.updated", "noteId": 12, "occurredAt": now_iso()}
    assert post_events(site.http, [event]) == 202

    def fresh() -> bool:
        env = site.envelope(12)
        return env is not None and b"Edited over AMQP" in env.result_json  # type: ignore[attr-defined]

    wait_until(fresh, timeout_s=30, what="the edit's snapshot rebuilt over RabbitMQ", details=site.tail)
    LATENCIES.append(time.perf_counter() - started)
    wait_until(lambda: site.workers.current.count(r"graphrag\.drain\[[^\]]+\] succeeded"),
               timeout_s=10, what="the drain task's success in the worker log", details=site.tail)


def test_queues_are_durable_quorum_queues_with_the_delivery_limit(site: Site) -> None:
    queues = _queues(site.broker_url)
    for name in ("realtime", "bulk"):
        kind, durable, arguments = queues[name]
        assert (kind, durable) == ("quorum", "true"), queues[name]
        assert f'{{"x-delivery-limit",{DELIVERY_LIMIT}}}' in arguments.replace(" ", ""), arguments
        assert f"{name}.parked" in queues, "the parking queue is declared when a worker starts"


def test_a_message_the_worker_cannot_take_is_parked_and_counted(site: Site) -> None:
    celery = create_celery(site.wiring.settings)
    before = queue_size(celery, "realtime.parked")
    with Connection(site.broker_url) as conn:  # a pickled body: the worker accepts JSON only
        conn.Producer().publish(b"\x80\x04K\x01.", exchange="realtime", routing_key="realtime",
                                content_type="application/x-python-serialize",
                                content_encoding="binary", headers={"task": "graphrag.drain",
                                                                    "id": str(uuid.uuid4())})
    wait_until(lambda: queue_size(celery, "realtime.parked") == before + 1, timeout_s=20,
               what="the refused message parked in realtime.parked", details=site.tail)


def test_a_full_rebuild_runs_on_the_bulk_queue_with_back_pressure(site: Site) -> None:
    with site.engine.begin() as conn:
        conn.execute(text("UPDATE note SET topic_constructor = :t WHERE id = 45"),
                     {"t": "Nightly over AMQP"})
    create_celery(site.wiring.settings).send_task("graphrag.nightly_dispatch", queue="bulk")

    def rebuilt() -> bool:
        env = site.envelope(45)
        return env is not None and b"Nightly over AMQP" in env.result_json  # type: ignore[attr-defined]

    wait_until(rebuilt, timeout_s=60, what="the nightly rebuild over the bulk queue", details=site.tail)
    FIGURES["RabbitMQ: nightly dispatch tasks run"] = str(
        site.workers.current.count(r"graphrag\.nightly_dispatch\[[^\]]+\] (?:succeeded|retry)"))


def test_an_unknown_broker_scheme_is_one_line() -> None:
    proc = graphrag("worker", env={**os.environ, "CELERY_BROKER_URL": "kafka://127.0.0.1:9092"})
    assert proc.returncode != 0
    assert b"the broker must be Redis or RabbitMQ" in proc.stderr and b"Traceback" not in proc.stderr
