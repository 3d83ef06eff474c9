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
import datetime as dt
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import Engine

from graphrag import Request
from graphrag.focus_strategy import WikiOutcome
from service.envelope import SnapshotKey, decode_envelope
from storage.database import open_engine
from storage.profiles.admin_2026 import create_tables, insert_rows
from tests.conftest import mariadb_database, url_string
from tests.e2e.conftest import Workers, broker_database, connect, redis_url, worker_env
from tests.reliability.harness import SECRET, TOKEN, Broker, now_iso, post_events, settings_from, settle
from tests.reliability.support import figure, sized
from tests.storage.wiki_rows import random_graph, table_rows
from worker.celery_app import create_celery
from worker.compose import Wiring
from worker.server import build_http_app

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

STRATEGY, SEEDS, MAX_LIMIT = "focus-context", (7,), 4_000
SWEEP = (1, 2, 5, 6, 50, 99, 100, 101, 500, 1999, 2000, 2001, MAX_LIMIT)
NOTES, STEPS = sized(ci=60, full=300), sized(ci=120, full=1_500)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


# -- Doughnut's write paths --------------------------------------------------------------------------
class Doughnut26:
    """Edits the 2026 tables as Doughnut does; each edit returns the events the relay posts."""

    def __init__(self, engine: Engine, rng: random.Random) -> None:
        self.engine, self.rng = engine, rng

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(text(sql), params))

    def run(self, *statements: tuple[str, dict[str, Any]]) -> None:
        with self.engine.begin() as conn:  # one transaction, as Doughnut's service method
            for sql, params in statements:
                conn.execute(text(sql), params)

    def next_id(self, table: str) -> int:
        return int(self.rows(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {table}")[0][0])

    def notes(self) -> list[int]:
        return [r[0] for r in self.rows("SELECT id FROM note WHERE notebook_id IS NOT NULL ORDER BY id")]

    def place(self, note: int) -> dict[str, Any]:
        folder, book = self.rows("SELECT folder_id, notebook_id FROM note WHERE id = :n", n=note)[0]
        links = [r[0] for r in self.rows(
            "SELECT target_note_id FROM note_wiki_title_cache WHERE note_id = :n ORDER BY id", n=note)]
        return {"folderId": folder, "notebookId": book, "linkTargets": links}

    def event(self, kind: str, note: int, before: dict[str, Any] | None) -> dict[str, Any]:
        out: dict[str, Any] = {"type": kind, "noteId": note, "occurredAt": now_iso()}
        if kind != "note.deleted":
            out["after"] = self.place(note)
        return out | ({"before": before} if before is not None else {})

    def links_of(self, note: int, targets: list[int]) -> list[tuple[str, dict[str, Any]]]:
        first = self.next_id("note_wiki_title_cache")
        return [("DELETE FROM note_wiki_title_cache WHERE note_id = :n", {"n": note}),
                *(("INSERT INTO note_wiki_title_cache (id, note_id, target_note_id, link_text) "
                   "VALUES (:i, :n, :t, :l)", {"i": first + k, "n": note, "t": t, "l": f"L{t}"})
                  for k, t in enumerate(targets))]

    # -- the edits ----------------------------------------------------------------------------------
    def relink(self, note: int) -> list[dict[str, Any]]:
        """A content edit adding and removing wiki links."""
        before, pool = self.place(note), self.notes()
        targets = self.rng.sample(pool, min(len(pool), self.rng.randrange(4)))
        links = " ".join(f"[[L{t}]]" for t in targets)
        content = f"---\ntype: Note\n---\n{links} {uuid.uuid4().hex[:6]}"
        self.run(("UPDATE note SET content = :c WHERE id = :n", {"c": content, "n": note}),
                 *self.links_of(note, targets))
        return [self.event("note.updated", note, before)]

    def rename(self, note: int) -> list[dict[str, Any]]:
        """A title rename: Doughnut rewrites the link text in every referrer's content."""
        referrers = sorted({r[0] for r in self.rows(
            "SELECT note_id FROM note_wiki_title_cache WHERE target_note_id = :n", n=note)})
        befores = {r: self.place(r) for r in referrers}
        stamp = uuid.uuid4().hex[:6]
        self.run(("UPDATE note SET title = :t WHERE id = :n", {"t": f"Renamed {stamp}", "n": note}),
                 *(("UPDATE note SET content = CONCAT(COALESCE(content, ''), :s) WHERE id = :r",
                    {"s": f" [[Renamed {stamp}]]", "r": r}) for r in referrers))
        return [self.event("note.updated", note, self.place(note)),
                *(self.event("note.updated", r, befores[r]) for r in referrers)]

    def move(self, note: int) -> list[dict[str, Any]]:
        """To another folder of its notebook, or to the notebook's root."""
        before = self.place(note)
        folders = [r[0] for r in self.rows("SELECT id FROM folder WHERE notebook_id = :b",
                                           b=before["notebookId"])]
        folder = self.rng.choice([None, *folders])
        self.run(("UPDATE note SET folder_id = :f WHERE id = :n", {"f": folder, "n": note}))
        return [self.event("note.moved", note, before)]

    def delete_or_undo(self, note: int) -> list[dict[str, Any]]:
        before = self.place(note)
        deleted = self.rows("SELECT deleted_at IS NOT NULL FROM note WHERE id = :n", n=note)[0][0]
        moment = None if deleted else dt.datetime(2026, 11, 1)
        self.run(("UPDATE note SET deleted_at = :d WHERE id = :n", {"d": moment, "n": note}))
        return [self.event("note.restored" if deleted else "note.deleted", note, before)]

    def rename_folder(self, _note: int) -> list[dict[str, Any]]:
        folder = self.rng.choice([r[0] for r in self.rows("SELECT id FROM folder")])
        self.run(("UPDATE folder SET name = CONCAT(name, '+') WHERE id = :f", {"f": folder}))
        return [{"type": "folder.renamed", "folderId": folder, "occurredAt": now_iso()}]

    def move_folder(self, _note: int) -> list[dict[str, Any]]:
        """Under another folder of its notebook that is not inside it, or to the notebook's root."""
        folders = {r[0]: (r[1], r[2]) for r in self.rows(
            "SELECT id, notebook_id, parent_folder_id FROM folder")}
        folder = self.rng.choice(sorted(folders))
        inside = {folder}
        while grown := {f for f, (_, parent) in folders.items() if parent in inside} - inside:
            inside |= grown
        book = folders[folder][0]
        options = [f for f, (b, _) in folders.items() if b == book and f not in inside]
        parent = self.rng.choice([None, *options])
        self.run(("UPDATE folder SET parent_folder_id = :p WHERE id = :f", {"p": parent, "f": folder}))
        return [{"type": "folder.moved", "folderId": folder, "occurredAt": now_iso(),
                 "before": {"parentFolderId": folders[folder][1]}, "after": {"parentFolderId": parent}}]

    def rename_notebook(self, _note: int) -> list[dict[str, Any]]:
        book = self.rng.choice([r[0] for r in self.rows("SELECT id FROM notebook")])
        self.run(("UPDATE notebook SET name = CONCAT(name, '+') WHERE id = :b", {"b": book}))
        return [{"type": "notebook.renamed", "notebookId": book, "occurredAt": now_iso()}]

    def create(self, _note: int) -> list[dict[str, Any]]:
        """A new note in a folder whose capped peer list is not full yet (few notes), linking out."""
        book, folder = self.rng.choice(self.rows(
            "SELECT f.notebook_id, f.id FROM folder f LEFT JOIN note n ON n.folder_id = f.id "
            "GROUP BY f.id, f.notebook_id HAVING COUNT(n.id) < 3") or self.rows(
            "SELECT notebook_id, NULL FROM note WHERE notebook_id IS NOT NULL LIMIT 1"))
        note, targets = self.next_id("note"), self.rng.sample(self.notes(), 2)
        row = {"n": note, "b": book, "f": folder, "t": f"New {note}", "c": "fresh",
               "at": dt.datetime(2026, 11, 2)}
        self.run(("INSERT INTO note (id, notebook_id, folder_id, title, content, created_at) "
                  "VALUES (:n, :b, :f, :t, :c, :at)", row), *self.links_of(note, targets))
        return [self.event("note.created", note, None)]

    KINDS: tuple[str, ...] = ("relink", "rename", "move", "delete_or_undo", "rename_folder",
                              "move_folder", "rename_notebook", "create")

    def edit(self, kind: str | None = None) -> list[dict[str, Any]]:
        kind = kind or self.rng.choice(self.KINDS)
        edit: Callable[[int], list[dict[str, Any]]] = getattr(self, kind)
        return edit(self.rng.choice(self.notes()))


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
        out = []
        for focus in self.foci():
            for seed in (None, *SEEDS):
                env = decode_envelope(self.wiring.cache.read(SnapshotKey(focus, STRATEGY, seed)))
                if env is None:
                    out.append((focus, seed, "missing"))
                elif env.result_json != self.live(focus, seed, env.result_limit).to_json():
                    out.append((focus, seed, "differs"))
        return out

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
        if site.stale():
            break
    assert site.stale(), f"a {kind} without its events went unnoticed"
    site.post(held)
    site.settle()
    assert site.stale() == []
