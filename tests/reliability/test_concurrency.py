"""Concurrency and staleness (issue 6, item 1).

A MariaDB graph of a few hundred notes; two real worker processes (concurrency 2 each, both queues),
once on one Redis (snapshots and broker) and once on the scaled-out engines (a 3-primary Redis Cluster
for snapshots, dirty-set shards and locks; RabbitMQ as the broker), see tests/reliability/engines.py.
A seeded random stream of edits is applied to the table the way Doughnut does (title and details
updates, moves, soft deletes of a subtree with the link notes pointing into it, restores, new link
notes and children, relinks), each commit followed by its signed webhook, several events per webhook
now and then. In parallel: nightly full rebuilds (``graphrag.nightly_dispatch`` on the bulk queue)
and two reader threads that delete a snapshot and read it, so the reader misses and writes back.

After quiescence every snapshot is checked against the database for what docs/algorithms.md makes exact
(:func:`tests.reliability.checks.check_snapshots`), and every live note must have every configured
variant. How many snapshots differ byte for byte from a live compute at their ``asOf`` (sampling
drift, which §5 leaves to the nightly rebuild and the soft TTL) is reported, not asserted.

Sizes (``GRAPHRAG_RELIABILITY_SCALE``): ci 250 notes / at least 800 events; full 400 notes / at least
10,000 events (the stream goes on until a quarter of the events followed the last nightly rebuild).

The targeted tests at the end replay one interleaving each deterministically, in-process: an edit
whose event is processed while a snapshot of a note that shows the edited note is being computed,
between the computation's database read and its write (the race docs/redis.md closes with edit stamps).
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from graphrag import Costing, NoteNotFound, Request
from service.context import Computed, ContextService
from service.drain import drain_until
from service.envelope import SnapshotKey
from service.events import record_events
from service.note_event import NoteEvent
from service.rebuild import RebuildReport
from storage.database import open_engine
from storage.redis.cache import RedisCache as SnapshotStore
from storage.redis.progress import RedisProgress as RebuildProgress
from storage.redis.queue import RedisDirtySet as DirtySet
from tasks import runtime as runtime_module
from tasks.jobs import drain
from tasks.runtime import Runtime
from tests.conftest import mariadb_database, url_string
from tests.e2e.conftest import connect, redis_url
from tests.reliability.checks import check_snapshots, live_drift, variants
from tests.reliability.edits import Doughnut, generated_rows
from tests.reliability.engines import ENGINES
from tests.reliability.harness import background, post_events, running_stack, settings_from
from tests.reliability.support import figure, sized
from tests.wiring import (
    NoteStore,
    build_reader,
    build_redis,
    build_service,
    build_snapshot_store,
    coordination_of,
    rebuild_notes,
    wall_ms,
)
from worker.celery.runtime import worker_app
from worker.refresh import BackgroundRefresher
from worker.settings import Settings

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

STRATEGIES = "wavefront,layered,relationship-bfs"
SEEDS = "0,1"
RANDOM_SEED = 20_261_121
TAIL = 0.25  # share of the events sent after the last nightly rebuild finished


def _unexpected_task_errors(log: str) -> list[tuple[str, str]]:
    """(task, exception class) of every task a worker log shows raising unexpectedly."""
    return re.findall(r"Task (graphrag\.\w+)\[[^\]]+\] raised unexpected: (?:\w+:)?(\w+)", log)


def _finished(progress: RebuildProgress, started_after_ms: int) -> bool:
    """Whether the nightly run dispatched at ``started_after_ms`` (or a later one) has finished."""
    status = progress.status()
    return int(status.get("startedAt", 0)) >= started_after_ms and bool(status.get("finishedAt"))


@pytest.mark.parametrize("on", ENGINES)
def test_random_edits_with_rebuilds_nightlies_and_write_backs_leave_no_stale_snapshot(
    tmp_path_factory: pytest.TempPathFactory, on: str,
) -> None:
    note_count, event_count = sized(ci=250, full=400), sized(ci=800, full=10_000)
    nightlies = sized(ci=2, full=6)
    rng = random.Random(RANDOM_SEED)
    rows = generated_rows(note_count, rng)
    env = {"GRAPHRAG_STRATEGIES": STRATEGIES, "GRAPHRAG_SEEDS": SEEDS,
           "GRAPHRAG_LAYERED_LIMITS": "2500,5000"}
    with running_stack(tmp_path_factory.mktemp("concurrency"), rows, env, workers=2, on=on) as stack:
        doughnut = Doughnut(stack.engine, rows, rng)
        known = [r["id"] for r in rows]  # append-only: the readers pick from it while edits go on
        reader = build_reader(stack.settings, stack.service, stack.store)
        kinds = variants(stack.settings)
        reads: Counter[str] = Counter()
        progress = RebuildProgress(stack.store.redis, stack.store.keys)

        def read_back(stop: threading.Event) -> None:
            own = random.Random(threading.get_ident())
            while not stop.is_set():
                note_id, variant = own.choice(known), own.choice(kinds)
                stack.store.redis.delete(stack.store.keys.snapshot(
                    note_id, variant.strategy, variant.seed, variant.limit))
                try:
                    served = reader.get(note_id, token_limit=variant.limit, seed=variant.seed,
                                        strategy=variant.strategy)
                    reads[served.source] += 1
                except NoteNotFound:
                    reads["not found"] += 1
                time.sleep(own.uniform(0, 0.01))

        sent = webhooks = nightly_runs = 0
        # nightlies start within the first 60 % of the stream; the stream then goes on for at least
        # TAIL of the events after the last one finished, so what the check finds afterwards was
        # kept fresh by event-driven rebuilds and write-backs, not repaired by a late nightly
        nightly_marks = [event_count * 3 * (i + 1) // (5 * nightlies) for i in range(nightlies)]
        last_nightly_ms, tail_from = 0, None
        started = time.perf_counter()
        with background(read_back, count=2, name="reader") as errors:
            while sent < event_count or tail_from is None or sent - tail_from < event_count * TAIL:
                assert sent < 3 * event_count, "the last nightly rebuild does not finish"
                batch = 1 if rng.random() < 0.6 else rng.randint(2, 6)
                events = []
                for _ in range(batch):
                    events.append(doughnut.edit())
                    if events[-1]["type"] == "note.created":
                        known.append(events[-1]["noteId"])
                assert post_events(stack.http, events) == 202
                sent += len(events)
                webhooks += 1
                if nightly_marks and sent >= nightly_marks[0]:
                    nightly_marks.pop(0)
                    last_nightly_ms = wall_ms()
                    stack.nightly()
                    nightly_runs += 1
                elif not nightly_marks and tail_from is None and _finished(progress, last_nightly_ms):
                    tail_from = sent
                if rng.random() < 0.03:
                    time.sleep(rng.uniform(0.05, 0.3))
        stream_s = time.perf_counter() - started
        assert errors == [], f"a reader thread failed: {errors[0]!r}"
        settle_s = stack.settle(timeout_s=sized(ci=120, full=600))

        report = stack.check()
        drift = live_drift(stack.service, report.envelopes.values())
        logs = "".join(w.log() for w in stack.workers.started)
        summary = {
            "events": sent, "webhooks": webhooks, "edits": dict(doughnut.ops),
            "nightly runs": nightly_runs, "events after the last nightly finished": sent - tail_from,
            "reader write-back reads": dict(reads),
            "snapshots checked": report.checked, "stale": len(report.stale),
            "missing": len(report.missing),
            "differ byte-wise from a live compute at their asOf (sampling drift, informational)": drift,
            "stream seconds": round(stream_s, 1), "quiescence seconds": round(settle_s, 1),
        }
        print("\nconcurrency:", summary)
        figure(f"concurrency ({on}): events / webhooks / after the last nightly",
               f"{sent} / {webhooks} / {sent - tail_from} ({dict(doughnut.ops)})")
        figure(f"concurrency ({on}): snapshots checked / stale / missing",
               f"{report.checked} / {len(report.stale)} / {len(report.missing)}")
        figure(f"concurrency ({on}): snapshots differing from a live compute at asOf (informational)",
               f"{drift} of {report.checked}")
        figure(f"concurrency ({on}): reader reads by source", dict(reads))
        figure(f"concurrency ({on}): seconds (stream, quiescence)", f"{stream_s:.1f}, {settle_s:.1f}")
        assert reads["live"] > 0, "no reader write-back happened"
        failures = _unexpected_task_errors(logs)
        figure(f"concurrency ({on}): tasks that raised unexpectedly", dict(Counter(failures)) or 0)
        assert failures == [], f"tasks raised unexpectedly: {Counter(failures)}"
        assert report.bad == 0, report.summary(history=doughnut.history)


def test_the_check_finds_every_kind_of_stale_content() -> None:
    """The control of the staleness check: table changes made without events are all found, and a
    full rebuild afterwards leaves nothing to find (no false positives)."""
    rows = generated_rows(60, random.Random(3))
    with in_process(rows, GRAPHRAG_STRATEGIES=STRATEGIES, GRAPHRAG_SEEDS=SEEDS) as r:
        rebuild_notes(r.settings, r.service, r.store, [row["id"] for row in rows])
        clean = check_snapshots(r.engine, r.store, r.settings, r.service)
        assert clean.bad == 0 and clean.checked == 8 * len(rows), clean.summary()
        link = next(row["id"] for row in rows if row["target_note_id"] is not None)
        statements = [
            "UPDATE note SET topic_constructor = 'silently renamed' WHERE id = 5",
            "UPDATE note SET description = CONCAT(REPEAT('猫', 60), 'x') WHERE id = 7",
            "UPDATE note SET parent_id = 4 WHERE id = 9",
            "UPDATE note SET deleted_at = '2025-06-01 00:00:00.001' WHERE id IN (12)",
            f"UPDATE note SET topic_constructor = 'silent predicate' WHERE id = {link}",
            "UPDATE note SET created_at = '2020-01-01 00:00:00' WHERE id = 20",
            "INSERT INTO note (id, parent_id, sibling_order, topic_constructor, created_at) "
            "VALUES (999, 5, 1, 'unseen', '2025-01-01 00:00:00')",
        ]
        with r.engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
        report = check_snapshots(r.engine, r.store, r.settings, r.service)
        found = " | ".join(p for problems in report.stale.values() for p in problems)
        for needle in ("silently renamed", "'details'", "'parentUriAndTitle'", "contextualPath",
                       "deleted or missing note /n12", "focus /n12 is deleted", "silent predicate",
                       "'createdAt'", "is no longer Child of /n"):
            assert needle in found, f"the check missed {needle!r}:\n{report.summary(40)}"
        assert any("{999}" in key for key in report.missing), report.summary()
        rebuild_notes(r.settings, r.service, r.store, range(1, 1000))
        assert check_snapshots(r.engine, r.store, r.settings, r.service).bad == 0


# -- one interleaving at a time ---------------------------------------------------------------------
#   1 Root ── 2 A ── 3 B ── 4 F      F shows A (contextualPath, AncestorInContextualPath), but an
#                                    event on A reaches F only through dep:A: A is neither F's parent
#                                    nor its sibling, target or child.
RACE_NOTES = [
    {"id": 1, "parent_id": None, "title": "Root"},
    {"id": 2, "parent_id": 1, "title": "A before"},
    {"id": 3, "parent_id": 2, "title": "B"},
    {"id": 4, "parent_id": 3, "title": "F"},
]
FOCUS, EDITED, NEW_TITLE = 4, 2, "A after"


@dataclass
class Race:
    settings: Settings
    engine: Engine
    service: ContextService
    store: SnapshotStore
    dirty: DirtySet

    def edit_and_process(self) -> set[int]:
        """Doughnut renames A and its event is processed (as a worker would) right now."""
        with self.engine.begin() as conn:
            conn.execute(text("UPDATE note SET topic_constructor = :t WHERE id = :i"),
                         {"t": NEW_TITLE, "i": EDITED})
        return record_events([NoteEvent("note.updated", EDITED)], self.service.store, self.store,
                             self.dirty, sibling_radius=4, now_ms=wall_ms())

    def edit_during_next_compute(self) -> list[set[int]]:
        """Make the service's next batch computation run the edit and its event after its reads."""
        original = self.service.compute_many
        affected: list[set[int]] = []

        def racing(requests: Sequence[Request], strategy: str,
                   costing: Costing | None = None) -> Computed:
            computed = original(requests, strategy, costing)
            if not affected:
                affected.append(self.edit_and_process())
            return computed

        self.service.compute_many = racing  # type: ignore[method-assign]
        return affected

    def drain(self) -> None:
        """What the workers do with the dirty set (no debounce: the test runs the edit itself)."""
        drain_until(self.dirty, lambda ids: rebuild_notes(self.settings, self.service, self.store, ids),
                    batch=100, debounce_ms=0, budget_s=30, clock_ms=wall_ms)

    def focus_titles(self) -> bytes:
        raw = self.store.read(SnapshotKey(FOCUS, "wavefront", 0))
        assert raw is not None, "the focus has no snapshot"
        return raw


@contextmanager
def in_process(rows: list[dict[str, Any]], **env: str) -> Iterator[Race]:
    """A MariaDB database with ``rows``, snapshots under a fresh prefix; no workers."""
    base = redis_url()
    connect(base, "the snapshot store").close()
    with mariadb_database() as url:
        database_url = url_string(url)
        engine = open_engine(database_url)
        NoteStore(engine).create_table()
        NoteStore(engine).insert(rows)
        prefix = f"graphrag-reliability:{uuid.uuid4().hex}:v1"
        settings = settings_from({"GRAPHRAG_DATABASE_URL": database_url, "GRAPHRAG_REDIS_URL": base,
                                  "GRAPHRAG_REDIS_PREFIX": prefix, **env})
        client = build_redis(settings)
        service = build_service(settings)
        store = build_snapshot_store(settings, client)
        try:
            yield Race(settings, engine, service, store, DirtySet(client, store.keys))
        finally:
            for key in client.scan_iter(match=f"{prefix}:*", count=1000):
                client.delete(key)
            client.close()
            service.store.engine.dispose()
            engine.dispose()


@pytest.fixture
def race() -> Iterator[Race]:
    with in_process([{"id": n["id"], "parent_id": n["parent_id"], "target_note_id": None,
                      "sibling_order": n["id"], "topic_constructor": n["title"],
                      "description": f"details of {n['title']}",
                      "created_at": "2025-05-05 05:05:05", "deleted_at": None}
                     for n in RACE_NOTES]) as r:
        yield r


def _shows_new_title_after_the_drain(race: Race) -> None:
    race.drain()
    assert race.dirty.size() == 0
    stored = race.focus_titles()
    assert b'"A before"' not in stored, "the focus's snapshot still shows A's old title"
    assert f'"{NEW_TITLE}"'.encode() in stored
    report = check_snapshots(race.engine, race.store, race.settings, race.service)
    assert not report.stale, report.summary()


def test_a_rebuild_racing_an_edit_is_redone(race: Race) -> None:
    """The control: the rebuild path closes the race (its focus goes back into the dirty set)."""
    affected = race.edit_during_next_compute()
    report = rebuild_notes(race.settings, race.service, race.store, [FOCUS])
    assert affected and FOCUS not in affected[0], "the event alone must not reach F for this test"
    assert report.count == 1 and report.requeue == {FOCUS}, report.summary()
    race.dirty.add(report.requeue, now_ms=wall_ms())  # what a drain does with a report's requeue
    _shows_new_title_after_the_drain(race)


def test_a_reader_write_back_racing_an_edit_is_redone(race: Race) -> None:
    reader = build_reader(race.settings, race.service, race.store)
    affected = race.edit_during_next_compute()
    served = reader.get(FOCUS)
    assert served.source == "live"
    assert affected and FOCUS not in affected[0]
    _shows_new_title_after_the_drain(race)


def test_a_stale_refresh_racing_an_edit_is_redone(race: Race) -> None:
    refresher = BackgroundRefresher(
        lambda note_id: rebuild_notes(race.settings, race.service, race.store, [note_id]),
        coordination_of(race.store), race.dirty)
    affected = race.edit_during_next_compute()
    try:
        refresher(FOCUS)  # what SnapshotReader.on_stale does in `graphrag serve`
    finally:
        refresher.shutdown()
    assert affected and FOCUS not in affected[0]
    _shows_new_title_after_the_drain(race)


def test_a_drain_whose_batch_outlasts_its_lease_ends_cleanly() -> None:
    """The full-size run's interleaving, scaled down: a 0.3 s lease and batches of 0.4 s."""
    rows = generated_rows(12, random.Random(1))
    with in_process(rows, CELERY_BROKER_URL="memory://") as r:
        celery = worker_app(r.settings)  # the tasks' app (its queue lives in this process)
        previous = runtime_module._factory

        def slow(ids: Iterable[int]) -> RebuildReport:
            time.sleep(0.4)
            return rebuild_notes(r.settings, r.service, r.store, ids)

        runtime = Runtime(
            notes=r.service.store, snapshots=r.store, dirty=r.dirty,
            coordination=coordination_of(r.store),
            progress=RebuildProgress(r.store.redis, r.store.keys), rebuild=slow, rebuild_piece=slow,
            clock_ms=wall_ms,
            bulk_backlog=lambda: 0, drain_batch=4, debounce_ms=0, drain_lease_ms=300,
            drain_budget_s=10)  # one session runs all three batches
        runtime_module.configure(lambda: runtime)
        try:
            r.dirty.add([row["id"] for row in rows], now_ms=wall_ms() - 1000)
            written = drain()  # one drain task, run here; three batches of 0.4 s
            assert written == len(rows)
            assert r.dirty.size() == 0
        finally:
            if previous is not None:
                runtime_module.configure(previous)
            celery.close()
