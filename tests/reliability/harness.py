"""Infrastructure of the concurrency and crash suites (issue 6, items 1 and 2).

Built on the end-to-end harness (:mod:`tests.e2e.conftest`: worker process groups, broker database
claiming, polling) and adds:

* settings from exactly an environment, signed webhook deliveries;
* :class:`Broker`: queue lengths, unacknowledged (reserved or running) messages and the messages a
  killed worker stranded, read straight from the broker's Redis database (on RabbitMQ:
  :class:`tests.reliability.engines.AmqpLook`); :func:`settle`: wait until nothing is left to do;
* :func:`running_stack`: MariaDB database, snapshots under a unique prefix, a private broker (on
  one Redis, or on a Redis Cluster with RabbitMQ: :mod:`tests.reliability.engines`), worker
  processes and the HTTP app, all torn down afterwards; :func:`background`: load threads.

Beside it: :mod:`tests.reliability.edits` (Doughnut's edits on the note table, from a seeded RNG),
:mod:`tests.reliability.checks` (every stored snapshot against the current database) and
:mod:`tests.reliability.servers` (a private redis-server and a TCP proxy the tests kill and cut).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import os
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from celery import Celery
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from standardwebhooks.webhooks import Webhook

from service.context import ContextService
from storage.database import open_engine
from storage.redis.cache import RedisCache as SnapshotStore
from storage.redis.client import delete_prefix
from storage.redis.queue import RedisDirtySet as DirtySet
from tests.conftest import mariadb_database, url_string
from tests.e2e.conftest import Workers, wait_until, worker_env
from tests.reliability.checks import CheckReport, check_snapshots
from tests.reliability.engines import AmqpLook, BrokerLook, Engines, Stranded, engines
from tests.support import drain_leases
from tests.wiring import NoteStore, build_redis, build_service, build_snapshot_store, rebuild_notes
from worker.celery_app import create_celery
from worker.http.server import build_http_app
from worker.settings import Settings, load_settings

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
TOKEN = "reliability-reader-token"


# -- settings ------------------------------------------------------------------------------------
def settings_from(env: dict[str, str]) -> Settings:
    """Settings built from exactly ``env`` (this process's GRAPHRAG_/CELERY_ variables ignored)."""
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith(("GRAPHRAG_", "CELERY_"))]:
            if key != "GRAPHRAG_TIKTOKEN_FILE":
                mp.delenv(key)
        for key, value in env.items():
            mp.setenv(key, value)
        return load_settings()


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")


def sign(events: list[dict[str, Any]], secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    """A Standard Webhooks delivery of ``events``: the body and its headers."""
    body = orjson.dumps({"events": events})
    msg_id, now = f"msg_{uuid.uuid4().hex}", dt.datetime.now(dt.UTC)
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(int(now.timestamp())),
               "webhook-signature": Webhook(secret).sign(msg_id, now, body.decode()),
               "content-type": "application/json"}
    return body, headers


def post_events(http: TestClient, events: list[dict[str, Any]]) -> int:
    """POST a signed delivery; returns the status code (202 expected when the broker is up)."""
    body, headers = sign(events)
    return http.post("/webhooks/note-events", content=body, headers=headers).status_code


# -- the broker --------------------------------------------------------------------------------------
QUEUES = ("realtime", "bulk")


class Broker:
    """Read-only looks into kombu's keys in the broker's Redis database (its own database)."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client

    def queued(self) -> int:
        total = 0
        for queue in (*QUEUES, "ae.undeliver"):
            for key in self.redis.scan_iter(match=f"{queue}*", count=1000):
                if self.redis.type(key) == b"list":
                    total += int(self.redis.llen(key))
        return total

    def undeliverable(self) -> int:
        """Messages kombu could not route (published while no queue was bound)."""
        return int(self.redis.llen("ae.undeliver"))

    def unacked(self) -> list[Stranded]:
        """Messages a worker took and has not acknowledged: running, reserved, or stranded."""
        scores = dict(self.redis.zrange("unacked_index", 0, -1, withscores=True))
        out = []
        for tag, raw in self.redis.hgetall("unacked").items():
            try:
                task = orjson.loads(raw)[0]["headers"]["task"]
            except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
                task = _task_name(raw)
            out.append(Stranded(str(task), float(scores.get(tag, 0.0))))
        return out

    def backlog(self) -> int:
        return self.queued() + int(self.redis.hlen("unacked"))


def _task_name(raw: bytes) -> str:
    found = re.search(rb'"task":\s*"([^"]+)"', raw)
    return found.group(1).decode() if found else "?"


def quiet(store: SnapshotStore, dirty: DirtySet, broker: BrokerLook) -> bool:
    """Nothing dirty, no drain holding a lease, nothing queued, reserved or running."""
    return (dirty.size() == 0 and not drain_leases(store.redis, store.keys)
            and broker.backlog() == 0)


def settle(store: SnapshotStore, dirty: DirtySet, broker: BrokerLook, *, timeout_s: float,
           details: Callable[[], str] = lambda: "", stable_s: float = 1.0) -> float:
    """Wait (bounded) until :func:`quiet` holds for ``stable_s``; returns the seconds waited."""
    started = time.monotonic()
    since: list[float] = []

    def steady() -> bool:
        if not quiet(store, dirty, broker):
            since.clear()
            return False
        if not since:
            since.append(time.monotonic())
        return time.monotonic() - since[0] >= stable_s

    def why() -> str:
        return (f"dirty {dirty.size()}, drain leases "
                f"{bool(drain_leases(store.redis, store.keys))}, broker backlog "
                f"{broker.backlog()} ({Counter(s.task for s in broker.unacked())})\n{details()}")

    wait_until(steady, timeout_s=timeout_s, what="quiescence (nothing dirty, queued or running)",
               details=why, interval_s=0.1)
    return time.monotonic() - started


@contextlib.contextmanager
def background(target: Callable[[threading.Event], None], count: int = 1,
               name: str = "load") -> Iterator[list[BaseException]]:
    """Run ``target(stop)`` on ``count`` threads; on exit set ``stop`` and join them. Yields the
    list of exceptions the threads raised (checked by the caller)."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target(stop)
        except BaseException as err:  # reported by the test
            errors.append(err)

    threads = [threading.Thread(target=run, name=f"{name}-{i}", daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    try:
        yield errors
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)


# -- a running system: MariaDB, Redis (own prefix), a broker, workers ----------------------------------
@dataclass
class Stack:
    """One MariaDB database, snapshots under a unique prefix, a private broker, workers (``celery -A
    worker.celery.app worker`` process groups) and the HTTP app in-process, on the ``engines`` chosen."""

    env: dict[str, str]
    settings: Settings
    engine: Engine
    store: SnapshotStore
    service: ContextService
    dirty: DirtySet
    broker: BrokerLook
    http: TestClient
    workers: Workers
    celery: Celery
    on: str  # the engines (tests.reliability.engines.ENGINES)

    def settle(self, timeout_s: float) -> float:
        return settle(self.store, self.dirty, self.broker, timeout_s=timeout_s,
                      details=lambda: "\n".join(w.tail(30) for w in self.workers.started[-2:]))

    def check(self) -> CheckReport:
        return check_snapshots(self.engine, self.store, self.settings, self.service)

    def nightly(self) -> None:
        """What beat does at night (and ``graphrag rebuild --all --queue``)."""
        self.celery.send_task("graphrag.nightly_dispatch", queue="bulk", retry=False)


def broker_look(chosen: Engines) -> tuple[BrokerLook, redis.Redis | None]:
    """How to look into the broker of ``chosen``; the Redis client to close afterwards, if any."""
    if chosen.name == "scaled":
        return AmqpLook(chosen.broker_url), None
    client = redis.Redis.from_url(chosen.broker_url, socket_timeout=5)
    return Broker(client), client


@contextlib.contextmanager
def running_stack(folder: Path, rows: list[dict[str, Any]], settings_env: dict[str, str], *,
                  workers: int, on: str = "single") -> Iterator[Stack]:
    """Set up everything on the engines ``on`` names (:mod:`tests.reliability.engines`), snapshots
    of every note written first, in this process; yield; and tear down: workers stopped (also after
    a failure), keys under the prefix deleted, database and broker vhost or database dropped."""
    with mariadb_database() as db_url, engines(on) as chosen:
        database_url = url_string(db_url)
        engine = open_engine(database_url)
        notes = NoteStore(engine)
        notes.create_table()
        notes.insert(rows)
        prefix = f"graphrag-reliability:{uuid.uuid4().hex}:v1"
        env = {"GRAPHRAG_DATABASE_URL": database_url, **chosen.redis_env,
               "GRAPHRAG_REDIS_PREFIX": prefix, "CELERY_BROKER_URL": chosen.broker_url,
               "GRAPHRAG_WEBHOOK_SECRET": SECRET, "GRAPHRAG_READER_TOKEN": TOKEN, **settings_env}
        settings = settings_from(env)
        client = build_redis(settings)
        look, broker_client = broker_look(chosen)
        service = build_service(settings)
        pool = Workers(worker_env(env), folder)
        try:
            store = build_snapshot_store(settings, client)
            report = rebuild_notes(settings, service, store, notes.live_ids_after(0, 10**6))
            assert report.errors == {} and report.requeue == frozenset(), report.summary()
            app = build_http_app(settings)
            for _ in range(workers):
                pool.start()
            with TestClient(app, raise_server_exceptions=False) as http:
                yield Stack(env, settings, engine, store, service,
                            DirtySet(client, store.keys, shards=settings.dirty_shards), look, http,
                            pool, create_celery(settings), on)
        finally:
            pool.stop_all()
            delete_prefix(client, prefix)
            client.close()
            if broker_client is not None:
                broker_client.close()
            service.store.engine.dispose()
            engine.dispose()


def unfinished_tasks(log: str) -> Counter[str]:
    """Tasks a worker's log shows received (running or reserved) and not finished, by name."""
    names = {task_id: name for name, task_id in re.findall(
        r"Task (graphrag\.\w+)\[([0-9a-f-]+)\] received", log)}
    done = set(re.findall(r"Task graphrag\.\w+\[([0-9a-f-]+)\] (?:succeeded|retry|raised|failed)", log))
    return Counter(name for task_id, name in names.items() if task_id not in done)
