"""Today's Doughnut end to end: an edit storm on a 2026 graph, and afterwards no stale snapshot.

A random 2026 graph (notebooks of two users and a circle, nested folders, wiki links, a hub, deleted
notes) is loaded into a fresh MariaDB database and rebuilt into focus-context snapshots (the seedless
order and one seed) in a private Redis prefix. Real Celery worker processes drain; edits reach them only
as signed webhooks through the HTTP app, as an operator's relay would post them.

:class:`Doughnut26` applies each edit to the tables the way Doughnut does (DOUGHNUT-2026 write paths:
a content edit rewrites the note and its ``note_wiki_title_cache`` rows; a title rename rewrites every
referrer's content, one event per rewritten note; moves change ``folder_id``; deletes and undo set and
clear ``deleted_at``; folders are renamed and moved; notebooks renamed; new notes land in folders whose
capped peer lists are not full yet) and returns the events the relay sends. The storm interleaves
nightly rebuilds (the dispatcher on the bulk queue) and reader write-backs (a snapshot evicted, then
read over HTTP: a miss computes live and writes back).

After quiescence *every* snapshot of every readable live note must equal a live compute byte for
byte, and a sample answers a sweep of tokenLimits in JSON and markdown equal to live. The control
applies each kind of edit without its events and shows the check reports the snapshots it staled,
then sends the events and shows they repair them. ``GRAPHRAG_RELIABILITY_SCALE=full``
(``make test-reliability``) runs a larger graph and a longer storm.
"""

from __future__ import annotations

import contextlib
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from graphrag import Request
from graphrag.wiki.focus.strategy import WikiOutcome
from service.decoding import decode_envelope
from service.envelope import SnapshotKey
from storage.database import open_engine
from storage.profiles.admin_2026 import create_tables, insert_rows
from tests.conftest import mariadb_database, url_string
from tests.e2e.conftest import Workers, broker_database, connect, redis_url, worker_env
from tests.reliability.doughnut26 import Doughnut26
from tests.reliability.harness import SECRET, TOKEN, Broker, post_events, settings_from, settle
from tests.reliability.support import figure, sized
from tests.storage.wiki_rows import random_graph, table_rows
from worker.celery_app import create_celery
from worker.compose import Wiring
from worker.http.server import build_http_app

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

STRATEGY, SEEDS, MAX_LIMIT = "focus-context", (7,), 4_000
SWEEP = (1, 2, 5, 6, 50, 99, 100, 101, 500, 1999, 2000, 2001, MAX_LIMIT)
NOTES, STEPS = sized(ci=60, full=300), sized(ci=120, full=1_500)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


# -- the running system ------------------------------------------------------------------------------
@dataclass
class Site:
    wiring: Wiring
    engine: Engine
    broker: Broker
    http: TestClient
    workers: Workers
    doughnut: Doughnut26

    def post(self, events: list[dict[str, Any]]) -> None:
        assert post_events(self.http, events) == 202

    def settle(self) -> None:
        w = self.wiring
        settle(w.cache, w.dirty, self.broker, timeout_s=sized(ci=120, full=600),
               details=self.workers.current.tail, stable_s=1.5)

    def live(self, focus: int, seed: int | None, limit: int) -> WikiOutcome:
        outcome = self.wiring.service.compute(Request(focus, seed, limit, 0, limit), STRATEGY)
        assert isinstance(outcome, WikiOutcome)
        return outcome

    def foci(self) -> list[int]:
        return [r[0] for r in self.doughnut.rows(
            "SELECT id FROM note WHERE deleted_at IS NULL AND notebook_id IS NOT NULL ORDER BY id")]

    def stale(self) -> list[tuple[int, int | None, str]]:
        """Every snapshot a readable live note must have, against a live compute now."""
        return list(self._stale())

    def any_stale(self) -> bool:
        """Whether :meth:`stale` would report anything (it stops at the first)."""
        return next(self._stale(), None) is not None

    def _stale(self) -> Iterator[tuple[int, int | None, str]]:
        for focus in self.foci():
            for seed in (None, *SEEDS):
                env = decode_envelope(self.wiring.cache.read(SnapshotKey(focus, STRATEGY, seed)))
                if env is None:
                    yield focus, seed, "missing"
                elif env.result_json != self.live(focus, seed, env.result_limit).to_json():
                    yield focus, seed, "differs"

    def write_back(self, focus: int) -> None:
        """Evict the focus's seedless snapshot and read it over HTTP: the miss writes back."""
        for key in self.wiring.client.scan_iter(match=f"{self.wiring.keys.prefix}:snap:{{{focus}}}:*"):
            self.wiring.client.delete(key)
        response = self.http.get(f"/api/notes/{focus}/graph", headers=AUTH)
        assert response.status_code in (200, 404), response.text


@contextlib.contextmanager
def running_site(folder: Path, seed: int) -> Iterator[Site]:
    """A MariaDB database with the graph, snapshots of every note, two worker processes, the app."""
    base = redis_url()
    connect(base, "the snapshot store").close()
    with mariadb_database() as db_url, broker_database(base) as broker_url:
        database_url = url_string(db_url)
        engine = open_engine(database_url)
        create_tables(engine)
        insert_rows(engine, table_rows(random_graph(seed, notes=NOTES)))
        prefix = f"graphrag-storm:{uuid.uuid4().hex}:v1"
        env = {"GRAPHRAG_DATABASE_URL": database_url, "GRAPHRAG_REDIS_URL": base,
               "GRAPHRAG_REDIS_PREFIX": prefix, "CELERY_BROKER_URL": broker_url,
               "GRAPHRAG_WEBHOOK_SECRET": SECRET, "GRAPHRAG_READER_TOKEN": TOKEN,
               "GRAPHRAG_SCHEMA": "doughnut-2026", "GRAPHRAG_SEEDS": ",".join(map(str, SEEDS)),
               "GRAPHRAG_MAX_TOKEN_LIMIT": str(MAX_LIMIT)}
        settings = settings_from(env)
        wiring, workers = Wiring(settings), Workers(worker_env(env), folder)
        try:
            report = wiring.rebuild(wiring.source.live_ids_after(0, 10**6))
            assert report.errors == {}, report.summary()
            workers.start()
            workers.start()
            broker = Broker(redis.Redis.from_url(broker_url, socket_timeout=5))
            doughnut = Doughnut26(engine, random.Random(seed))
            with TestClient(build_http_app(settings), raise_server_exceptions=False) as http:
                yield Site(wiring, engine, broker, http, workers, doughnut)
        finally:
            workers.stop_all()
            for key in wiring.client.scan_iter(match=f"{prefix}:*", count=1000):
                wiring.client.delete(key)
            wiring.client.close()
            wiring.source.engine.dispose()  # type: ignore[attr-defined]
            engine.dispose()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with running_site(tmp_path_factory.mktemp("storm-2026"), seed=11) as running:
        yield running


# -- the tests ---------------------------------------------------------------------------------------
def test_after_an_edit_storm_every_snapshot_equals_a_live_compute(site: Site) -> None:
    rng, kinds = random.Random(5), dict.fromkeys(Doughnut26.KINDS, 0)
    celery = create_celery(site.wiring.settings)
    for step in range(STEPS):
        kind = rng.choice(Doughnut26.KINDS)
        kinds[kind] += 1
        site.post(site.doughnut.edit(kind))
        if step % 40 == 20:
            celery.send_task("graphrag.nightly_dispatch", queue="bulk")
        if rng.random() < 0.1:
            site.write_back(rng.choice(site.foci()))
    site.settle()
    stale = site.stale()
    figure("2026 storm: edits by kind", kinds)
    figure("2026 storm: snapshots checked / stale", f"{2 * len(site.foci())} / {len(stale)}")
    assert stale == []
    assert len(site.foci()) > NOTES // 2


def test_a_sample_answers_every_token_limit_in_json_and_markdown_as_live(site: Site) -> None:
    reader = site.wiring.reader()
    for focus in site.foci()[:8]:
        for seed in (None, *SEEDS):
            for limit in SWEEP:
                want = site.live(focus, seed, limit)
                served = reader.get(focus, token_limit=limit, seed=seed)
                assert (served.source, served.body) == ("cache", want.to_json()), (focus, seed, limit)
                markdown = reader.get(focus, token_limit=limit, seed=seed, fmt="markdown")
                assert markdown.text == want.markdown(), (focus, seed, limit)


@pytest.mark.parametrize("kind", Doughnut26.KINDS)
def test_the_check_finds_an_edit_sent_without_its_events_and_the_events_repair_it(
        site: Site, kind: str) -> None:
    """The control: each kind of edit applied without its events leaves a snapshot the check
    reports; posting the events repairs it."""
    held: list[dict[str, Any]] = []
    for _ in range(8):  # a random folder, notebook or note may be shown by no snapshot
        held += site.doughnut.edit(kind)
        if site.any_stale():
            break
    assert site.any_stale(), f"a {kind} without its events went unnoticed"
    site.post(held)
    site.settle()
    assert site.stale() == []
