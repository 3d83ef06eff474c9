"""The service on a Redis Cluster: snapshots, dirty set and locks on a local 3-primary cluster.

Real worker processes (two of them, so drains of different shards run at once) keep their snapshots,
reverse index, dirty-set shards and locks in the test process's local Redis Cluster
(``GRAPHRAG_REDIS_CLUSTER=true``, the URL of one node); the broker is a separate single Redis, as it
must be. Edits posted as signed webhooks reach every affected snapshot; afterwards every snapshot
matches the database (the content check of the reliability suites), and a worker killed with SIGKILL
in the middle of a stream of edits loses nothing.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import Engine

from service.decoding import decode_envelope
from service.envelope import SnapshotKey
from storage.database import open_engine
from storage.profiles.admin_2025 import create_tables, insert_notes
from storage.redis.client import delete_prefix
from tests.conftest import mariadb_database, url_string
from tests.e2e.conftest import (
    LATENCIES,
    Workers,
    broker_database,
    connect,
    redis_url,
    wait_until,
    worker_env,
)
from tests.e2e.worker_system import hand_graph
from tests.reliability.checks import check_snapshots
from tests.reliability.harness import SECRET, TOKEN, Broker, now_iso, post_events, settings_from
from tests.services.redis_cluster import ClusterInfo
from tests.support import drain_leases
from worker.compose import Wiring
from worker.http.server import build_http_app

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]


@dataclass
class Site:
    wiring: Wiring
    engine: Engine
    http: TestClient
    workers: Workers
    broker: Broker

    def title_shown(self, note_id: int, focus: int, title: str) -> bool:
        env = decode_envelope(self.wiring.cache.read(SnapshotKey(focus, "wavefront", 0)))
        return env is not None and title.encode() in env.result_json

    def settle(self) -> None:
        """Nothing dirty, no drain holding a lock and nothing waiting in the broker, for 2 s (a
        drain message the killed worker held stays unacknowledged until the visibility timeout:
        when it comes back it drains an empty set)."""
        calm: list[float] = []

        def quiet() -> bool:
            now_quiet = (self.wiring.dirty.size() == 0 and self.broker.queued() == 0
                         and not drain_leases(self.wiring.client, self.wiring.keys))
            if not now_quiet:
                calm.clear()
                return False
            calm.append(time.monotonic())
            return calm[-1] - calm[0] >= 2.0

        wait_until(quiet, timeout_s=90, what="nothing dirty, locked or queued",
                   details=self.workers.current.tail)


@pytest.fixture(scope="module")
def site(redis_cluster_info: ClusterInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = redis_url()
    connect(base, "the broker's Redis").close()
    with mariadb_database() as db_url, broker_database(base) as broker_url:
        database_url = url_string(db_url)
        engine = open_engine(database_url)
        create_tables(engine)
        insert_notes(engine, hand_graph().records())
        prefix = f"graphrag-cluster:{uuid.uuid4().hex}:v1"
        env = {"GRAPHRAG_DATABASE_URL": database_url,
               "GRAPHRAG_REDIS_URL": redis_cluster_info.startup_url,
               "GRAPHRAG_REDIS_CLUSTER": "true", "GRAPHRAG_REDIS_PREFIX": prefix,
               "CELERY_BROKER_URL": broker_url, "GRAPHRAG_WEBHOOK_SECRET": SECRET,
               "GRAPHRAG_READER_TOKEN": TOKEN, "GRAPHRAG_STRATEGIES": "wavefront,layered",
               "GRAPHRAG_SEEDS": "0", "GRAPHRAG_DIRTY_SHARDS": "8"}
        settings = settings_from(env)
        wiring = Wiring(settings)
        workers = Workers(worker_env(env), tmp_path_factory.mktemp("cluster-workers"))
        try:
            assert wiring.rebuild(wiring.source.live_ids_after(0, 10**6)).errors == {}
            workers.start()
            workers.start()
            with TestClient(build_http_app(settings), raise_server_exceptions=False) as http:
                yield Site(wiring, engine, http, workers, Broker(redis.Redis.from_url(broker_url)))
        finally:
            workers.stop_all()
            delete_prefix(wiring.client, prefix)
            wiring.source.engine.dispose()  # type: ignore[attr-defined]
            engine.dispose()


def _retitle(site: Site, note_id: int, title: str) -> None:
    with site.engine.begin() as conn:
        conn.execute(text("UPDATE note SET topic_constructor = :t WHERE id = :i"),
                     {"t": title, "i": note_id})


def test_an_edit_reaches_the_snapshots_showing_it_on_the_cluster(site: Site) -> None:
    _retitle(site, 12, "Edited on the cluster")
    started = time.perf_counter()
    event = {"type": "note.updated", "noteId": 12, "occurredAt": now_iso()}
    assert post_events(site.http, [event]) == 202
    wait_until(lambda: site.title_shown(12, 12, "Edited on the cluster")
               and site.title_shown(12, 2, "Edited on the cluster"), timeout_s=30,
               what="the edited note's and its parent's snapshots rebuilt on the cluster",
               details=site.workers.current.tail)
    LATENCIES.append(time.perf_counter() - started)
    response = site.http.get("/notes/2/graph", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200 and response.headers["X-Graphrag-Source"] == "cache"


def test_a_stream_of_edits_with_a_sigkill_leaves_every_snapshot_matching_the_database(
        site: Site) -> None:
    rng = random.Random(9)
    notes = [n for n in range(10, 49)]
    for i in range(200):
        note = rng.choice(notes)
        _retitle(site, note, f"Stream {i} of {note}")
        assert post_events(site.http, [{"type": "note.updated", "noteId": note,
                                        "occurredAt": now_iso()}]) == 202
        if i == 100:
            site.workers.current.kill()
            site.workers.start()
    site.settle()
    report = check_snapshots(site.engine, site.wiring.cache, site.wiring.settings, site.wiring.service)
    assert report.bad == 0, report.summary()
