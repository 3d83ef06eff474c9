"""The running system of the end-to-end worker tests (issue 4), and how its snapshots are inspected.

One MariaDB database holds two notebooks: a hand-built one of about sixty notes (parents, siblings,
grandchildren, link notes across it) that the edit tests work on, and a generated one of a few hundred
notes that gives the SIGKILL test several drain batches to interrupt. Every note has snapshots for
all three strategies, two seeds and layered's two tokenLimits (8 per note), written first by a full
rebuild in this process (:func:`_full_rebuild`). A :class:`System` is the database, the snapshot
store, the HTTP app under TestClient and the worker processes; ``tests/e2e/conftest.py`` builds one
per test module and broker (the ``broker_url`` and ``system`` fixtures).

An edit is made as Doughnut makes it: the SQL change is committed, then the signed webhook is sent.
:func:`mismatches` compares snapshots with a live compute; :func:`assert_renamed` waits until every
snapshot that showed an old title shows the new one.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import random
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
import redis
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import Engine
from standardwebhooks.webhooks import Webhook

from graphrag import Request
from service.context import ContextService
from service.decoding import decode_envelope
from service.envelope import Envelope
from storage.redis.cache import RedisCache as SnapshotStore
from storage.redis.queue import RedisDirtySet as DirtySet
from tests.e2e.conftest import FIGURES, LATENCIES, Workers, wait_until
from tests.support import DAY_MS, NOW_MS, Graph, drain_leases
from worker.compose import Wiring
from worker.settings import Settings

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
TOKEN = "e2e-reader-token"
STRATEGIES = ("wavefront", "layered", "relationship-bfs")
SEEDS = (0, 7)
LAYERED_LIMITS = (2500, 5000)
BULK_HEAD, BULK_NOTES = 1000, 300
FRESH_WITHIN_S = 20.0


# -- the notes -------------------------------------------------------------------------------------
def title(note_id: int) -> str:
    """Unique titles: no title is a substring of another, so a byte search finds exactly one note."""
    return f"Title-{note_id:04d}-v1"


def hand_graph() -> Graph:
    """About sixty notes: root 1 with parents 2, 3, 4; children, grandchildren; link notes across."""
    g = Graph()

    def add(note_id: int, parent: int | None, order: int, target: int | None = None) -> None:
        g.add(note_id, parent_id=parent, target_id=target, sibling_order=order, title=title(note_id),
              details=f"Details of note {note_id}. " * (1 + note_id % 3),
              created_at_ms=NOW_MS - (note_id % 11) * DAY_MS)

    add(1, None, 0)
    for order, parent in enumerate((2, 3, 4)):
        add(parent, 1, order * 10)
    families = {2: range(10, 18), 3: range(20, 26), 4: range(30, 34), 10: range(40, 43),
                11: range(43, 45), 20: range(45, 47), 30: (47,), 40: (48, 49), 14: range(60, 67),
                33: range(67, 73)}
    for parent, children in families.items():
        for order, child in enumerate(children):
            add(child, parent, order * 10)
    links = {50: (12, 21), 51: (22, 10), 52: (31, 40), 53: (13, 45), 54: (24, 11), 55: (1, 32),
             56: (41, 20), 57: (46, 48), 58: (44, 25)}
    for link, (subject, target) in links.items():
        add(link, subject, 1000 + link, target)
    return g


def bulk_graph() -> Graph:
    """A generated notebook: a tree of fan-out 6 under BULK_HEAD, every 7th note a link note."""
    g = Graph()
    rng = random.Random(4)
    g.add(BULK_HEAD, title=f"Bulk-{BULK_HEAD}")
    for i in range(1, BULK_NOTES):
        note_id = BULK_HEAD + i
        parent = BULK_HEAD + (i - 1) // 6
        target = BULK_HEAD + rng.randrange(0, i) if i % 7 == 0 else None
        g.add(note_id, parent_id=parent, target_id=target, sibling_order=i, title=f"Bulk-{note_id}",
              details=f"generated note {note_id}", created_at_ms=NOW_MS - (i % 30) * DAY_MS)
    return g


# -- the running system ----------------------------------------------------------------------------
@dataclass
class System:
    settings: Settings
    engine: Engine
    store: SnapshotStore
    service: ContextService
    dirty: DirtySet
    http: TestClient
    workers: Workers
    wiring: Wiring

    @property
    def broker(self) -> str:
        """``redis`` or ``amqp``: the scheme of the broker URL."""
        return self.settings.broker_url.split(":", 1)[0]

    # -- database ----------------------------------------------------------------------------------
    def sql(self, statement: str, **params: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(text(statement), params)

    def live_ids(self) -> list[int]:
        with self.engine.connect() as conn:
            rows = conn.execute(text("SELECT id FROM note WHERE deleted_at IS NULL ORDER BY id"))
            return [int(r[0]) for r in rows]

    # -- webhooks ----------------------------------------------------------------------------------
    def send(self, events: list[dict[str, Any]]) -> Any:
        body = orjson.dumps({"events": events})
        msg_id, now = f"msg_{uuid.uuid4().hex}", dt.datetime.now(dt.UTC)
        headers = {"webhook-id": msg_id, "webhook-timestamp": str(int(now.timestamp())),
                   "webhook-signature": Webhook(SECRET).sign(msg_id, now, body.decode()),
                   "content-type": "application/json"}
        response = self.http.post("/webhooks/note-events", content=body, headers=headers)
        assert response.status_code == 202, response.text
        assert response.json() == {"accepted": len(events)}
        return response

    # -- redis -------------------------------------------------------------------------------------
    @property
    def redis(self) -> redis.Redis:
        return self.store.redis

    def snapshot_keys(self) -> list[bytes]:
        return sorted(self.redis.scan_iter(match=f"{self.store.keys.prefix}:snap:*", count=1000))

    def values(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        out: dict[bytes, bytes | None] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            out.update(zip(chunk, self.redis.mget(chunk), strict=True))
        return out

    def snapshots(self) -> dict[bytes, bytes]:
        return {k: v for k, v in self.values(self.snapshot_keys()).items() if v is not None}

    def envelopes(self) -> dict[bytes, Envelope]:
        out = {}
        for key, value in self.snapshots().items():
            env = decode_envelope(value)
            assert env is not None, f"undecodable snapshot {key!r}"
            out[key] = env
        return out

    def variant_keys(self, note_id: int) -> list[bytes]:
        keys = []
        for strategy in STRATEGIES:
            limits: Iterable[int | None] = LAYERED_LIMITS if strategy == "layered" else (None,)
            keys += [self.store.keys.snapshot(note_id, strategy, seed, limit).encode()
                     for seed in SEEDS for limit in limits]
        return keys

    def drain_running(self) -> bool:
        return bool(drain_leases(self.redis, self.store.keys))

    def quiet(self) -> bool:
        return self.dirty.size() == 0 and not self.drain_running()

    def settle(self, timeout_s: float = 30) -> None:
        wait_until(self.quiet, timeout_s=timeout_s, what="the dirty set empties and no drain runs",
                   details=self.workers.current.tail)

    def fresh_after(self, send_at: float, check: Any, what: str, timeout_s: float = FRESH_WITHIN_S,
                    details: Any = None) -> float:
        """Poll ``check`` until true; record and return the webhook-to-fresh latency."""
        wait_until(check, timeout_s=timeout_s, what=what,
                   details=details or self.workers.current.tail)
        latency = time.perf_counter() - send_at
        LATENCIES.append(latency)
        return latency


def _full_rebuild(wiring: Wiring) -> None:
    live = wiring.source.live_ids_after(0, 100_000)
    started = time.perf_counter()
    report = wiring.rebuild(live)
    seconds = time.perf_counter() - started
    assert report.errors == {}
    assert report.count == 8 * len(live), report.summary()
    FIGURES["initial full rebuild (in-process)"] = (
        f"{report.count} snapshots of {len(live)} notes in {seconds:.1f} s "
        f"({report.count / seconds:.0f} snapshots/s)")


# -- helpers on snapshot contents ------------------------------------------------------------------
def quoted(value: str) -> bytes:
    return orjson.dumps(value)


def showing(snaps: dict[bytes, bytes], needle: bytes) -> set[bytes]:
    return {key for key, value in snaps.items() if needle in value}


def result_of(value: bytes) -> dict[str, Any]:
    env = decode_envelope(value)
    assert env is not None
    return env.result


def focus_of(key: bytes) -> int:
    return int(key.decode().split("{", 1)[1].split("}", 1)[0])


def mismatches(system: System, keys: Iterable[bytes]) -> list[str]:
    """Snapshots (of ``keys``) that differ from a live compute with their strategy, seed, tokenLimit
    and ``asOf``; a missing snapshot of a live note counts too."""
    found: list[str] = []
    by_strategy: dict[str, list[tuple[bytes, Envelope, Request]]] = {}
    for key, value in system.values(sorted(set(keys))).items():
        env = decode_envelope(value)
        if env is None:
            found.append(f"{key!r}: missing")
            continue
        request = Request(env.note_id, env.seed, env.max_token_limit, env.as_of_ms,
                          traversal_token_limit=env.max_token_limit)
        by_strategy.setdefault(env.strategy, []).append((key, env, request))
    for strategy, items in by_strategy.items():
        results = system.service.compute_many([r for _, _, r in items], strategy).results
        for key, env, request in items:
            outcome = results[request]
            live = None if isinstance(outcome, Exception) else outcome.to_json()
            if live != orjson.dumps(env.result):
                found.append(f"{key!r}: differs from a live compute")
    return found


def edit_title(system: System, note_id: int, new_title: str) -> float:
    """Rename a note in MariaDB and send the signed note.updated; returns when it was sent."""
    system.sql("UPDATE note SET topic_constructor = :t, updated_at = UTC_TIMESTAMP() WHERE id = :i",
               t=new_title, i=note_id)
    sent = time.perf_counter()
    system.send([{"type": "note.updated", "noteId": note_id, "occurredAt": _now_iso()}])
    return sent


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")


def assert_renamed(system: System, note_id: int, old: str, new: str) -> float:
    """Edit the title; wait until each snapshot that showed the old one shows the new one."""
    before = system.snapshots()
    watched = sorted(showing(before, quoted(old)))
    others = {focus_of(k) for k in watched} - {note_id}
    assert len(watched) > 8 and others, f"note {note_id} should be shown by other notes' snapshots"
    sent = edit_title(system, note_id, new)

    def all_fresh() -> bool:
        values = system.values(watched)
        return all(v is not None and quoted(new) in v and quoted(old) not in v
                   for v in values.values())

    latency = system.fresh_after(sent, all_fresh, f"every snapshot that showed {old!r} shows {new!r}")
    after = system.snapshots()
    assert showing(after, quoted(old)) == set(), "a snapshot still shows the old title"
    assert set(watched) <= showing(after, quoted(new))
    assert mismatches(system, watched) == []
    return latency
