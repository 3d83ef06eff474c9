"""Crashes (issue 6, item 2): killed workers, a restarted and flushed Redis, cut MySQL connections.

(a) The worker's process group is SIGKILLed again and again during a stream of signed edits (ci 5
    kills, full 50), half of the kills while a drain of the running worker holds its lock (mid-batch),
    the others at a random moment (events or drains in flight); a worker is restarted each time.
    Afterwards nothing is left dirty, queued or unacknowledged and no snapshot is stale or missing.
    Messages the killed main process had taken (acks late) wait in the broker's ``unacked`` hash
    until the visibility timeout (docs/architecture.md); the workers here run with
    ``GRAPHRAG_TASK_TIME_LIMIT_S=50`` / ``GRAPHRAG_VISIBILITY_TIMEOUT_S=111`` (the smallest pair the
    settings accept that keeps the soft limit, limit - 30 s, above a drain's 10 s budget). kombu
    returns such messages to their queue when a worker starts and every 100 s (its restore
    interval x throttle); rather than idling up to 100 s, the test starts one more worker once the
    timeout has passed. No nightly rebuild runs here: it would repair what a lost event missed.
    The kills run in a module fixture and the check is the module's last test, so the tests between
    run while the stranded messages wait out their visibility timeout (the kill loop:
    :mod:`tests.reliability.sigkill`). The same kills run on the scaled-out engines too (a Redis
    Cluster for snapshots, dirty-set shards and locks; RabbitMQ as the broker; two workers, the
    newest killed each time): RabbitMQ requeues what a killed worker held when its connection
    closes, so that check follows the kills directly.
(b) Two private ``redis-server`` instances, the cache and the broker, as deployed
    (:mod:`tests.reliability.outage`). The cache is flushed (FLUSHALL) under a running worker, then
    killed (-9) and restarted empty: while it is down the reader computes live and the webhook
    answers 503; afterwards a miss is computed live and written back, edits sent after the restart
    are applied, and ``graphrag rebuild --all --queue`` restores every snapshot (the documented
    recovery, ops/runbook.md). The broker is killed and restarted empty too: edits sent afterwards
    are applied (a worker that exits on the lost connection is started again, as the deployment's
    restart policy does).
(c) MariaDB behind a TCP proxy that is cut (every connection closed, new ones refused) and restored:
    meanwhile the reader serves the snapshots it has, even stale, and answers a miss with
    ``Unavailable`` / HTTP 503; the worker's event, drain and nightly tasks retry and succeed after the
    restore; nothing is left dirty and no snapshot is stale.
(d) Redis down: the reader computes live; Redis and MariaDB down: ``Unavailable`` / 503.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from graphrag.core.errors import Unavailable
from service.envelope import SnapshotKey
from storage.redis.cache import RedisCache as SnapshotStore
from storage.redis.progress import RedisProgress as RebuildProgress
from tests.e2e.conftest import wait_until, worker_env
from tests.reliability.checks import content_problems, load_notes
from tests.reliability.harness import TOKEN, post_events
from tests.reliability.outage import Outage
from tests.reliability.outage import outage as outage  # a fixture
from tests.reliability.sigkill import SigkillRun, _killed_stream, _kills_happened, _nothing_lost_or_stale
from tests.reliability.support import cli_env, figure, graphrag
from worker.celery_app import create_celery

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

AUTH = {"Authorization": f"Bearer {TOKEN}"}


# -- (a) SIGKILL ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sigkill_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SigkillRun]:
    """The kills on one Redis (kombu's Redis transport strands what a killed worker held)."""
    with _killed_stream(tmp_path_factory.mktemp("sigkill"), on="single", workers=1) as run:
        yield run


def test_sigkill_the_worker_repeatedly_during_a_stream_of_edits(sigkill_run: SigkillRun) -> None:
    """What the kills left is checked by the last test of this module, once the messages they
    stranded became visible again (the tests between use that time)."""
    _kills_happened(sigkill_run)


def test_sigkill_workers_on_a_redis_cluster_and_rabbitmq(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The same kills with two workers on the scaled-out engines: drains of different shards run in
    both; RabbitMQ requeues what a killed worker held at once, so the check follows directly."""
    with _killed_stream(tmp_path_factory.mktemp("sigkill-scaled"), on="scaled", workers=2) as run:
        _kills_happened(run)
        _nothing_lost_or_stale(run)


# -- a private Redis, MariaDB behind a proxy ---------------------------------------------------------
def _title_event(engine: Engine, note_id: int, title: str) -> list[dict[str, Any]]:
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE note SET topic_constructor = %s WHERE id = %s", (title, note_id))
    return [{"type": "note.updated", "noteId": note_id, "occurredAt": "2026-11-21T10:00:00Z"}]


def _shows(store: SnapshotStore, note_id: int, needle: str) -> bool:
    raw = store.read(SnapshotKey(note_id, "wavefront", 0))
    return raw is not None and orjson.dumps(needle) in raw


def _valid_live(outage: Outage, note_id: int, body: bytes) -> None:
    problems = content_problems(load_notes(outage.engine), note_id, body)
    assert problems == [], problems


# -- (b) Redis killed, restarted empty ---------------------------------------------------------------
def _post_until_accepted(http: TestClient, events: list[dict[str, Any]], details: Any) -> int:
    """POST as a sender that retries on 503 does (a new delivery each time); the 503s seen."""
    statuses: list[int] = []

    def accepted() -> bool:
        statuses.append(post_events(http, events))
        return statuses[-1] == 202

    wait_until(accepted, timeout_s=60, what="the webhook accepts the delivery",
               details=lambda: f"statuses {statuses}\n{details()}", interval_s=0.5)
    return len(statuses) - 1


def _full_rebuild_through_the_workers(outage: Outage) -> None:
    """``graphrag rebuild --all --queue`` (the documented recovery), followed to its end."""
    proc = graphrag("rebuild", "--all", "--queue", env=cli_env(**outage.env))
    assert proc.returncode == 0, proc.stderr.decode()
    progress = RebuildProgress(outage.store.redis, outage.store.keys)
    wait_until(lambda: progress.status().get("finishedAt"), timeout_s=120,
               what="the queued full rebuild finishes", details=lambda: outage.workers.current.tail(60))
    outage.quiet(timeout_s=60)
    status = graphrag("rebuild", "--status", env=cli_env(**outage.env))
    assert b"nightly: finished" in status.stdout, status.stdout + status.stderr


def _snapshot_count(store: SnapshotStore) -> int:
    return sum(1 for _ in store.redis.scan_iter(match=f"{store.keys.prefix}:snap:*", count=1000))


def test_cache_redis_flushed_then_killed_and_restarted_empty_then_recovered_by_a_full_rebuild(
    outage: Outage,
) -> None:
    outage.rebuild_all()
    worker = outage.workers.start()
    reader = outage.reader()
    assert reader.get(10).source == "cache"
    with outage.http() as http:
        # FLUSHALL under a running worker: misses are computed live and written back, edits apply
        outage.store.redis.flushall()
        assert reader.get(10).source == "live"
        assert reader.get(10).source == "cache"
        flushed = _title_event(outage.engine, 16, "Renamed after the FLUSHALL")
        assert post_events(http, flushed) == 202
        wait_until(lambda: _shows(outage.store, 16, "Renamed after the FLUSHALL"), timeout_s=30,
                   what="an edit after the FLUSHALL is applied", details=worker.tail)

        outage.cache.kill9()
        # down: the reader computes live, the webhook asks the sender to retry (no replay guard)
        served = reader.get(10)
        assert served.source == "live"
        _valid_live(outage, 10, served.body)
        response = http.get("/notes/11/graph", headers=AUTH)
        assert response.status_code == 200 and response.headers["X-Graphrag-Source"] == "live"
        health = http.get("/healthz")
        assert health.status_code == 200 and health.json()["database"] == "ok", health.json()
        assert health.json()["redis"] != "ok"
        during = _title_event(outage.engine, 12, "Renamed while the cache was down")
        assert post_events(http, during) == 503

        outage.cache.start()  # no persistence: it comes back empty, i.e. flushed
        assert _snapshot_count(outage.store) == 0
        assert reader.get(10).source == "live"  # a miss: computed live and written back
        assert reader.get(10).source == "cache"
        # the sender's retry of the refused delivery, and an edit made after the restart
        after = _title_event(outage.engine, 14, "Renamed after the restart")
        for events in (during, after):
            _post_until_accepted(http, events, worker.tail)
        wait_until(lambda: _shows(outage.store, 12, "Renamed while the cache was down")
                   and _shows(outage.store, 14, "Renamed after the restart"), timeout_s=60,
                   what="the worker applies the edits sent after the restart",
                   details=lambda: worker.tail(60))
        outage.quiet(timeout_s=60)
        partial = _snapshot_count(outage.store)
        _full_rebuild_through_the_workers(outage)
        outage.check()
        figure("cache restart: snapshots after the restart / after `rebuild --all --queue`",
               f"{partial} / {_snapshot_count(outage.store)}")
        assert reader.get(20).source == "cache"
        assert worker.proc is not None and worker.proc.poll() is None, "the worker died"


def test_broker_redis_killed_and_restarted_empty(outage: Outage) -> None:
    """The broker loses queued and unacknowledged tasks (ops/runbook.md); the dirty set, in the
    cache, survives. A worker that exits is started again, as the deployment's restart policy does."""
    outage.rebuild_all()
    worker = outage.workers.start()
    with outage.http() as http:
        before = _title_event(outage.engine, 50, "Renamed before the broker restart")
        assert post_events(http, before) == 202
        wait_until(lambda: _shows(outage.store, 50, "Renamed before the broker restart"),
                   timeout_s=30, what="the first edit is applied", details=worker.tail)
        outage.broker_server.kill9()
        during = _title_event(outage.engine, 51, "Renamed while the broker was down")
        assert post_events(http, during) == 503
        outage.broker_server.start()
        time.sleep(2)
        restarted = 0

        def supervised() -> None:
            """What `restart: unless-stopped` does, at any time: kombu may exit the worker on
            the lost broker connection a while after the restart."""
            nonlocal worker, restarted
            if worker.proc is not None and worker.proc.poll() is not None:
                restarted += 1
                worker = outage.workers.start()

        supervised()
        after = _title_event(outage.engine, 52, "Renamed after the broker restart")
        refused = sum(_post_until_accepted(http, events, worker.tail) for events in (during, after))

        def applied() -> bool:
            supervised()
            return (_shows(outage.store, 51, "Renamed while the broker was down")
                    and _shows(outage.store, 52, "Renamed after the broker restart"))

        wait_until(applied, timeout_s=90, what="edits sent after the broker restart are applied",
                   details=lambda: worker.tail(60))
        outage.quiet(timeout_s=60)
        broker = outage.broker()
        assert broker.undeliverable() == 0, "a message was published while no queue was bound"
        broker.redis.close()
        _full_rebuild_through_the_workers(outage)
        outage.check()
        figure("broker restart: worker restarts needed / deliveries refused (503) after it",
               f"{restarted} / {refused}")


# -- (c) MySQL connections cut and restored ------------------------------------------------------------
def _retries(log: str, task: str) -> int:
    return len(re.findall(rf"Task graphrag\.{task}\[[^\]]+\] retry", log))


def test_mysql_connections_cut_and_restored(outage: Outage) -> None:
    outage.rebuild_all()
    # a 3 s debounce: a drain scheduled by an event processed before the cut runs during the cut
    outage.env["GRAPHRAG_DEBOUNCE_MS"] = "3000"
    outage.workers.env = worker_env(outage.env)
    worker = outage.workers.start()
    dirty = outage.dirty
    stale_reader = outage.reader(GRAPHRAG_SOFT_TTL_S="1")
    with outage.http(GRAPHRAG_SOFT_TTL_S="1") as http:
        assert post_events(http, _title_event(outage.engine, 30, "Edited before the cut")) == 202
        assert dirty.size() > 0  # recorded by the webhook before its answer
        # (during the cut the webhook cannot record: it hands the events on to the event task)
        outage.proxy.cut()
        cut_at = time.monotonic()
        # during the cut: Doughnut still commits (directly) and posts; a nightly starts
        assert post_events(http, _title_event(outage.engine, 31, "Edited during the cut")) == 202
        create_celery(outage.settings).send_task("graphrag.nightly_dispatch", queue="bulk")
        time.sleep(1.1)  # every snapshot is now past the 1 s soft TTL
        served = stale_reader.get(32)
        assert served.source == "stale"
        stored = outage.store.read(SnapshotKey(32, "wavefront", 0)) or b""
        assert served.body == stored.split(b',"result":', 1)[1][:-1]
        response = http.get("/notes/33/graph", headers=AUTH)
        assert response.status_code == 200 and response.headers["X-Graphrag-Source"] == "stale"
        for variant in outage.store.redis.scan_iter(match="*:snap:{34}:*"):
            outage.store.redis.delete(variant)
        with pytest.raises(Unavailable):
            stale_reader.get(34)
        response = http.get("/notes/34/graph", headers=AUTH)
        assert response.status_code == 503 and "error" in response.json(), response.text
        health = http.get("/healthz")
        assert health.status_code == 200 and health.json()["database"] != "ok", health.json()
        wait_until(lambda: all(_retries(worker.log(), t) for t in
                               ("process_events", "drain", "nightly_dispatch")),
                   timeout_s=20, what="the event, drain and nightly tasks fail and retry",
                   details=lambda: worker.tail(80))
        cut_s = time.monotonic() - cut_at
        outage.proxy.restore()

    progress = RebuildProgress(outage.store.redis, outage.store.keys)
    wait_until(lambda: progress.status().get("finishedAt"), timeout_s=120,
               what="the nightly started during the cut finishes", details=lambda: worker.tail(60))
    outage.quiet(timeout_s=120)
    log = worker.log()
    retries = {t: _retries(log, t) for t in ("process_events", "drain", "nightly_dispatch",
                                             "rebuild_piece")}
    figure("mysql cut: seconds cut / retries by task", f"{cut_s:.1f} / {retries}")
    assert _shows(outage.store, 30, "Edited before the cut")
    assert _shows(outage.store, 31, "Edited during the cut")
    assert dirty.size() == 0
    outage.check()
    assert outage.reader().get(34).source == "cache"


# -- (d) the reader with Redis down, and with both down ------------------------------------------------
def test_reader_with_redis_down_and_with_redis_and_mysql_down(outage: Outage) -> None:
    outage.rebuild_all()
    reader = outage.reader()
    assert reader.get(40).source == "cache"
    with outage.http() as http:
        outage.cache.kill9()
        served = reader.get(40)
        assert served.source == "live"
        _valid_live(outage, 40, served.body)
        response = http.get("/api/notes/41/graph?tokenLimit=1000", headers=AUTH)
        assert response.status_code == 200 and response.headers["X-Graphrag-Source"] == "live"

        outage.proxy.cut()
        with pytest.raises(Unavailable):
            reader.get(40)
        response = http.get("/notes/41/graph", headers=AUTH)
        assert response.status_code == 503 and "error" in response.json(), response.text
        health = http.get("/healthz")
        assert health.status_code == 503 and health.json()["status"] == "unavailable"

        outage.proxy.restore()
        assert reader.get(40).source == "live"
        outage.cache.start()
        assert reader.get(40).source == "live"  # a miss on the empty Redis, written back
        assert reader.get(40).source == "cache"
        assert http.get("/notes/41/graph", headers=AUTH).status_code == 200


# -- (a), continued: after the kills -----------------------------------------------------------------
def test_after_the_sigkills_nothing_is_dirty_lost_or_stale(sigkill_run: SigkillRun) -> None:
    _nothing_lost_or_stale(sigkill_run)
