"""A Redis Cluster primary lost under load: killed (-9) and restarted empty, the rest of the cluster
keeping its keys.

This is the cluster's own failure, which a single Redis cannot have: *part* of the cache is gone. On
the scaled-out engines (a private 3-primary cluster for snapshots, dirty-set shards, stamps and
locks; RabbitMQ as the broker; a real Celery worker), after a stream of signed edits the primary
that holds the global edit sequence (``seq``) is killed — the worst one to lose, since the edit
stamps on the other primaries outlive it. While it is down every read is still answered (from the
cache or computed live, with the database's content) and the webhook asks the sender to retry (503),
or accepts the delivery when its replay-guard key is on a live primary (202: the worker's event task
retries until the cache answers again). It is restarted on its ports and ``nodes.conf``, so it
rejoins with its slots and no data. Then the delivery made while it was down and a new edit are
applied, the worker settles — nothing dirty, queued or running — and
``graphrag rebuild --all --queue`` restores every snapshot: none stale. Were ``seq`` a plain
counter, it would restart below the surviving stamps and every rebuild of a focus showing a note
edited before the loss would be requeued, again and again: the worker would never settle
(docs/redis.md, "The edit race").
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from redis.cluster import RedisCluster
from sqlalchemy.engine import Engine

from service.context import ContextService
from service.envelope import SnapshotKey
from storage.database import open_engine
from storage.redis.cache import RedisCache as SnapshotStore
from storage.redis.keys import Keys
from storage.redis.progress import RedisProgress as RebuildProgress
from storage.redis.queue import RedisDirtySet as DirtySet
from tests.conftest import mariadb_database, url_string
from tests.e2e.conftest import Workers, wait_until, worker_env
from tests.reliability.checks import check_snapshots, content_problems, load_notes
from tests.reliability.edits import generated_rows
from tests.reliability.engines import AmqpLook
from tests.reliability.harness import SECRET, TOKEN, post_events, settings_from, settle
from tests.reliability.support import cli_env, figure, graphrag
from tests.services.rabbitmq import rabbitmq_vhost
from tests.services.redis_cluster import ClusterInfo, ClusterNode, redis_cluster
from tests.wiring import (
    NoteStore,
    build_reader,
    build_redis,
    build_service,
    build_snapshot_store,
    rebuild_notes,
)
from worker.http.server import build_http_app

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

NOTES = 80
EDITS_BEFORE = 30


@dataclass
class Site:
    engine: Engine
    cluster: ClusterInfo
    env: dict[str, str]
    service: ContextService
    store: SnapshotStore
    broker: AmqpLook
    workers: Workers

    def node_of(self, key: str) -> ClusterNode:
        port = self.store.redis.get_node_from_key(key).port
        return next(node for node in self.cluster.nodes if node.port == port)

    def snapshots(self) -> int:
        return sum(1 for _ in self.store.redis.scan_iter(match=f"{self.store.keys.prefix}:snap:*",
                                                          count=1000))

    def quiet(self, timeout_s: float) -> float:
        return settle(self.store, DirtySet(self.store.redis, self.store.keys), self.broker,
                      timeout_s=timeout_s, details=lambda: self.workers.current.tail(60))

    def http(self) -> TestClient:
        return TestClient(build_http_app(settings_from(self.env)), raise_server_exceptions=False)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    rows = generated_rows(NOTES, random.Random(11))
    with redis_cluster(tmp_path) as cluster, rabbitmq_vhost() as broker_url, \
            mariadb_database() as db_url:
        engine = open_engine(url_string(db_url))
        NoteStore(engine).create_table()
        NoteStore(engine).insert(rows)
        prefix = f"graphrag-cluster-outage:{uuid.uuid4().hex}:v1"
        env = {"GRAPHRAG_DATABASE_URL": url_string(db_url), "GRAPHRAG_REDIS_URL": cluster.startup_url,
               "GRAPHRAG_REDIS_CLUSTER": "true", "GRAPHRAG_REDIS_PREFIX": prefix,
               "CELERY_BROKER_URL": broker_url, "GRAPHRAG_WEBHOOK_SECRET": SECRET,
               "GRAPHRAG_READER_TOKEN": TOKEN, "GRAPHRAG_STRATEGIES": "wavefront",
               "GRAPHRAG_SEEDS": "0"}
        env["GRAPHRAG_REDIS_URL"] = _survivor_url(cluster, Keys(prefix).seq())
        settings = settings_from(env)
        service = build_service(settings)
        store = build_snapshot_store(settings, build_redis(settings))
        workers = Workers(worker_env(env), tmp_path)
        try:
            yield Site(engine, cluster, env, service, store, AmqpLook(broker_url), workers)
        finally:
            workers.stop_all()
            service.store.engine.dispose()  # type: ignore[attr-defined]
            engine.dispose()


def _survivor_url(cluster: ClusterInfo, seq_key: str) -> str:
    """The URL of a primary that does not hold ``seq``: the clients' way in stays up."""
    with RedisCluster.from_url(cluster.startup_url) as client:
        holder = client.get_node_from_key(seq_key).port
    return next(url for url in cluster.urls if not url.endswith(f":{holder}"))


def _rename(site: Site, note_id: int, title: str) -> list[dict[str, Any]]:
    with site.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE note SET topic_constructor = %s WHERE id = %s", (title, note_id))
    return [{"type": "note.updated", "noteId": note_id, "occurredAt": "2026-11-26T10:00:00Z"}]


def _shows(site: Site, note_id: int, title: str) -> bool:
    raw = site.store.read(SnapshotKey(note_id, "wavefront", 0))
    return raw is not None and orjson.dumps(title) in raw


def _reads_while_down(site: Site) -> Counter[str]:
    """Every focus read through the reader: answered, from the cache or live with today's content."""
    reader = build_reader(settings_from(site.env), site.service, site.store)
    notes, sources = load_notes(site.engine), Counter[str]()
    for focus in range(1, NOTES + 1, 4):
        served = reader.get(focus)
        sources[served.source] += 1
        if served.source == "live":
            assert content_problems(notes, focus, served.body) == []
    return sources


def _accepted(http: TestClient, events: list[dict[str, Any]], site: Site) -> None:
    wait_until(lambda: post_events(http, events) == 202, timeout_s=60, interval_s=0.5,
               what="the webhook accepts the delivery again", details=site.workers.current.tail)


def _rebuild_all_through_the_workers(site: Site) -> None:
    proc = graphrag("rebuild", "--all", "--queue", env=cli_env(**site.env))
    assert proc.returncode == 0, proc.stderr.decode()
    progress = RebuildProgress(site.store.redis, site.store.keys)
    wait_until(lambda: progress.status().get("finishedAt"), timeout_s=120,
               what="the queued full rebuild finishes", details=site.workers.current.tail)
    site.quiet(timeout_s=60)


def test_a_primary_killed_and_restarted_empty_loses_its_keys_and_nothing_else(site: Site) -> None:
    ids = NoteStore(site.engine).live_ids_after(0, 10**6)
    assert rebuild_notes(settings_from(site.env), site.service, site.store, ids).errors == {}
    site.workers.start()
    with site.http() as http:
        for n, note_id in enumerate(random.Random(3).choices(ids, k=EDITS_BEFORE)):
            assert post_events(http, _rename(site, note_id, f"Before the loss {n}")) == 202
        site.quiet(timeout_s=60)
        before = site.snapshots()

        holder = site.node_of(site.store.keys.seq())
        holder.kill9()
        during = _rename(site, 7, "Renamed while a primary was down")
        status = post_events(http, during)  # 202 when its replay-guard key is on a live primary
        assert status in (202, 503)
        sources = _reads_while_down(site)
        assert sources["live"] > 0, sources

        holder.start()  # same ports and nodes.conf: it rejoins with its slots, and no keys
        site.cluster.await_settled()
        after_restart = site.snapshots()
        assert 0 < after_restart < before
        if status == 503:
            _accepted(http, during, site)
        assert post_events(http, _rename(site, 9, "Renamed after the restart")) == 202
        wait_until(lambda: _shows(site, 7, "Renamed while a primary was down")
                   and _shows(site, 9, "Renamed after the restart"), timeout_s=60,
                   what="the edits sent after the restart are applied",
                   details=site.workers.current.tail)
        waited = site.quiet(timeout_s=60)  # a seq restarted below the stamps never settles
        _rebuild_all_through_the_workers(site)
    report = check_snapshots(site.engine, site.store, settings_from(site.env), site.service)
    assert report.bad == 0, report.summary()
    figure("cluster primary loss: snapshots before / after the restart / after `rebuild --all "
           "--queue`", f"{before} / {after_restart} / {site.snapshots()}")
    figure("cluster primary loss: reads while down by source / webhook answer / seconds to settle "
           "after the restart", f"{dict(sources)} / {status} / {waited:.1f}")
