"""Infrastructure of the concurrency and crash suites (issue 6, items 1 and 2).

Built on the end-to-end harness (:mod:`tests.e2e.conftest`: worker process groups, broker database
claiming, polling) and adds:

* :class:`Doughnut`: edits the MariaDB ``note`` table the way Doughnut does (title and details
  updates, moves, soft deletes of a subtree with the link notes pointing into it, restores, new
  link notes and children, relinks) from a seeded RNG and returns the events it would post;
* :func:`check_snapshots`: every stored snapshot against the *current* database, for the content
  docs/algorithms.md makes exact (see its docstring), plus the snapshots every live note must have;
* :func:`live_drift`: how many snapshots differ byte for byte from a live compute at their ``asOf``
  (sampling drift included: informational only);
* :class:`Broker`: queue lengths, unacknowledged (reserved or running) messages and the messages a
  killed worker stranded, read straight from the broker's Redis database (on RabbitMQ:
  :class:`tests.reliability.engines.AmqpLook`);
* :class:`RedisServer`: a private ``redis-server`` on a free port that the tests may kill and
  restart; :class:`TcpProxy`: a TCP proxy in front of MariaDB that can cut every connection and
  refuse new ones, then come back on the same port;
* :func:`running_stack`: MariaDB database, snapshots under a unique prefix, a private broker (on
  one Redis, or on a Redis Cluster with RabbitMQ: :mod:`tests.reliability.engines`), worker
  processes and the HTTP app, all torn down afterwards.
"""

from __future__ import annotations

import base64
import calendar
import contextlib
import datetime as dt
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from celery import Celery
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import Engine
from standardwebhooks.webhooks import Webhook

from graphrag import GraphRagError, Request, config_hash
from service.context import ContextService
from service.envelope import Envelope, decode_envelope
from storage.database import open_engine
from storage.redis.cache import RedisCache as SnapshotStore
from storage.redis.client import delete_prefix, mget
from storage.redis.queue import RedisDirtySet as DirtySet
from tests.conftest import mariadb_database, url_string
from tests.e2e.conftest import Workers, wait_until, worker_env
from tests.reliability.engines import AmqpLook, BrokerLook, Engines, Stranded, engines
from tests.reliability.support import check_result
from tests.support import drain_lock_tokens
from tests.wiring import NoteStore, build_redis, build_service, build_snapshot_store, rebuild_notes
from worker.celery_app import create_celery
from worker.server import build_http_app
from worker.settings import Settings, load_settings

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
TOKEN = "reliability-reader-token"
TRUNCATE_BYTES = 150
_EPOCH = dt.datetime(1970, 1, 1)


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


@dataclass(frozen=True)
class Variant:
    strategy: str
    seed: int
    limit: int | None  # the key's tokenLimit (layered only)


def variants(settings: Settings) -> list[Variant]:
    """Every snapshot a live note must have under ``settings``."""
    out = []
    for strategy in settings.strategies_for("tree"):
        limits: Iterable[int | None] = settings.layered_limits if strategy == "layered" else (None,)
        out += [Variant(strategy, seed, limit) for seed in settings.seeds for limit in limits]
    return out


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


# -- the note graph --------------------------------------------------------------------------------
BASE_CREATED = dt.datetime(2025, 3, 1, 8, 0, 0)
TEXTS = (
    "plain ascii text ",
    "猫と犬の話。漢字かな交じり文 ",
    "🍩🐕‍🦺 emoji ",
    "שלום עולם مرحبا ",
    "e\u0301 combining ",
)


def details_text(rng: random.Random) -> str | None:
    """NULL, short, or long (cut at 150 bytes in related notes, often inside a multibyte char)."""
    kind = rng.random()
    if kind < 0.15:
        return None
    piece = rng.choice(TEXTS)
    if kind < 0.55:
        return piece.strip() + f" #{rng.randrange(10**6)}"
    return (piece * (1 + 400 // len(piece)))[: rng.randrange(120, 400)] + f" #{rng.randrange(10**6)}"


def generated_rows(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """``count`` notes under three roots (notebooks): a random tree, every 6th note a link note."""
    rows: list[dict[str, Any]] = []
    roots = (1, 2, 3)
    for note_id in range(1, count + 1):
        if note_id in roots:
            parent, target = None, None
        else:
            parent = rng.choice([r["id"] for r in rows[-40:] if r["target_note_id"] is None])
            target = rng.randrange(1, note_id) if note_id % 6 == 0 else None
        rows.append({
            "id": note_id, "parent_id": parent, "target_note_id": target,
            "sibling_order": note_id * 1000,
            "topic_constructor": f":link {note_id}" if target else f"Note {note_id}",
            "description": details_text(rng),
            "created_at": BASE_CREATED + dt.timedelta(hours=note_id, seconds=note_id % 7),
            "deleted_at": None,
        })
    return rows


@dataclass
class _Mirror:
    """What the editor knows of one note (it is the only writer of the table)."""

    parent: int | None
    target: int | None
    order: int
    deleted: dt.datetime | None = None


@dataclass
class _Deletion:
    root: int
    ids: frozenset[int]
    stamp: dt.datetime


OPS = (("title", 30), ("details", 18), ("move", 15), ("delete", 8), ("restore", 7),
       ("link", 12), ("child", 5), ("relink", 5))


class Doughnut:
    """Edits ``note`` as Doughnut does, each change committed before its event is returned.

    One thread only: it keeps a mirror of the structure to pick sensible edits (no cycles, restores
    of whole deletions whose parent is live) and never reads the table back.
    """

    def __init__(self, engine: Engine, rows: list[dict[str, Any]], rng: random.Random) -> None:
        self.engine, self.rng = engine, rng
        self.notes = {r["id"]: _Mirror(r["parent_id"], r["target_note_id"], r["sibling_order"])
                      for r in rows}
        self.deletions: list[_Deletion] = []
        self.next_id = max(self.notes) + 1
        self.revision = 0
        self.ops: Counter[str] = Counter()
        self._names, self._weights = zip(*OPS, strict=True)

    # -- picking ---------------------------------------------------------------------------------
    def live(self) -> list[int]:
        return [i for i, n in self.notes.items() if n.deleted is None]

    def _live_plain(self) -> list[int]:
        return [i for i, n in self.notes.items() if n.deleted is None and n.target is None]

    def _children(self) -> dict[int, list[int]]:
        kids: dict[int, list[int]] = defaultdict(list)
        for i, n in self.notes.items():
            if n.parent is not None:
                kids[n.parent].append(i)
        return kids

    def _subtree(self, root: int, kids: dict[int, list[int]]) -> set[int]:
        found, stack = {root}, [root]
        while stack:
            for child in kids.get(stack.pop(), ()):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        return found

    def _is_live(self, note_id: int | None) -> bool:
        return note_id is not None and note_id in self.notes and self.notes[note_id].deleted is None

    # -- SQL ---------------------------------------------------------------------------------------
    def _sql(self, statement: str, **params: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(text(statement), params)

    def _event(self, kind: str, note_id: int, before: dict[str, int | None] | None = None,
               after: dict[str, int | None] | None = None) -> dict[str, Any]:
        event: dict[str, Any] = {"type": kind, "noteId": note_id, "occurredAt": now_iso()}
        if before is not None:
            event["before"] = before
        if after is not None:
            event["after"] = after
        return event

    # -- edits -------------------------------------------------------------------------------------
    def edit(self) -> dict[str, Any]:
        """One random edit, committed; returns its event."""
        while True:
            op = self.rng.choices(self._names, self._weights)[0]
            event = getattr(self, f"_{op}")()
            if event is not None:
                self.ops[op] += 1
                return event

    def _title(self) -> dict[str, Any]:
        note_id = self.rng.choice(self.live())
        self.revision += 1
        tail = self.rng.choice(("", " 猫", " 🍩", " שלום"))
        base = ":link" if self.notes[note_id].target is not None else "Note"
        self._sql("UPDATE note SET topic_constructor = :t, updated_at = UTC_TIMESTAMP() WHERE id = :i",
                  t=f"{base} {note_id} r{self.revision}{tail}", i=note_id)
        return self._event("note.updated", note_id)

    def _details(self) -> dict[str, Any]:
        note_id = self.rng.choice(self.live())
        self._sql("UPDATE note SET description = :d, updated_at = UTC_TIMESTAMP() WHERE id = :i",
                  d=details_text(self.rng), i=note_id)
        return self._event("note.updated", note_id)

    def _move(self) -> dict[str, Any] | None:
        candidates = [i for i in self._live_plain() if self.notes[i].parent is not None]
        if not candidates:
            return None
        note_id = self.rng.choice(candidates)
        old = self.notes[note_id].parent
        below = self._subtree(note_id, self._children())
        parents = [p for p in self._live_plain() if p not in below and p != old]
        if not parents:
            return None
        new = self.rng.choice(parents)
        order = self.rng.randrange(0, 10**7)
        self._sql("UPDATE note SET parent_id = :p, sibling_order = :o, updated_at = UTC_TIMESTAMP() "
                  "WHERE id = :i", p=new, o=order, i=note_id)
        self.notes[note_id].parent, self.notes[note_id].order = new, order
        return self._event("note.moved", note_id, {"parentId": old}, {"parentId": new})

    def _delete(self) -> dict[str, Any] | None:
        candidates = [i for i in self.live() if self.notes[i].parent is not None]
        note_id = self.rng.choice(candidates)
        below = {i for i in self._subtree(note_id, self._children()) if self._is_live(i)}
        if len(below) > 40:
            return None
        pointing = {i for i, n in self.notes.items()
                    if n.deleted is None and n.target in below and i not in below}
        ids = below | pointing
        stamp = dt.datetime(2025, 6, 1) + dt.timedelta(milliseconds=len(self.deletions) + 1)
        self._sql(f"UPDATE note SET deleted_at = :t WHERE id IN ({_ids(ids)})", t=stamp)
        for i in ids:
            self.notes[i].deleted = stamp
        self.deletions.append(_Deletion(note_id, frozenset(ids), stamp))
        return self._event("note.deleted", note_id)

    def _restore(self) -> dict[str, Any] | None:
        ready = [d for d in self.deletions
                 if self.notes[d.root].parent is None or self._is_live(self.notes[d.root].parent)]
        if not ready:
            return None
        deletion = self.rng.choice(ready)
        self.deletions.remove(deletion)
        back: set[int] = set()
        pending = {i for i in deletion.ids if self.notes[i].deleted == deletion.stamp}
        changed = True
        while changed:  # parents first: never a live note under a deleted parent
            changed = False
            for i in sorted(pending - back):
                parent = self.notes[i].parent
                if i == deletion.root or parent in back or self._is_live(parent):
                    back.add(i)
                    changed = True
        self._sql(f"UPDATE note SET deleted_at = NULL WHERE id IN ({_ids(back)})")
        for i in back:
            self.notes[i].deleted = None
        return self._event("note.restored", deletion.root)

    def _insert(self, parent: int, target: int | None, title: str) -> int:
        note_id = self.next_id
        self.next_id += 1
        order = max((n.order for n in self.notes.values() if n.parent == parent), default=0) + 1000
        created = dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)
        self._sql("INSERT INTO note (id, parent_id, target_note_id, sibling_order, topic_constructor, "
                  "description, created_at, updated_at) VALUES (:i, :p, :t, :o, :title, :d, :c, :c)",
                  i=note_id, p=parent, t=target, o=order, title=title, d=details_text(self.rng),
                  c=created)
        self.notes[note_id] = _Mirror(parent, target, order)
        return note_id

    def _link(self) -> dict[str, Any] | None:
        subject = self.rng.choice(self._live_plain())
        target = self.rng.choice(self.live())
        if target == subject:
            return None
        note_id = self._insert(subject, target, self.rng.choice((":relates to", ":a part of",
                                                                  ":an example of")))
        return self._event("note.created", note_id, None,
                           {"parentId": subject, "targetNoteId": target})

    def _child(self) -> dict[str, Any]:
        parent = self.rng.choice(self._live_plain())
        note_id = self._insert(parent, None, f"Note {self.next_id} new")
        return self._event("note.created", note_id, None, {"parentId": parent})

    def _relink(self) -> dict[str, Any] | None:
        links = [i for i in self.live() if self.notes[i].target is not None]
        if not links:
            return None
        note_id = self.rng.choice(links)
        old, new = self.notes[note_id].target, self.rng.choice(self.live())
        if new in (old, note_id):
            return None
        self._sql("UPDATE note SET target_note_id = :t, updated_at = UTC_TIMESTAMP() WHERE id = :i",
                  t=new, i=note_id)
        self.notes[note_id].target = new
        return self._event("note.updated", note_id, {"targetNoteId": old}, {"targetNoteId": new})


def _ids(ids: Iterable[int]) -> str:
    return ", ".join(str(int(i)) for i in sorted(ids))


# -- the content check (docs/algorithms.md) ---------------------------------------------------
@dataclass(frozen=True)
class DbNote:
    id: int
    parent_id: int | None
    target_id: int | None
    order: int
    title: str
    details: str | None
    created_ms: int
    deleted: bool

    @property
    def order_key(self) -> tuple[int, int]:
        return (self.order, self.id)


def load_notes(engine: Engine) -> dict[int, DbNote]:
    """Every row of ``note`` as it is now (the engine must read TIMESTAMPs in UTC)."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT id, parent_id, target_note_id, sibling_order, topic_constructor, description, "
            "created_at, deleted_at FROM note")).all()
    return {int(r[0]): DbNote(int(r[0]), r[1], r[2], int(r[3]), r[4], r[5],
                              calendar.timegm(r[6].utctimetuple()) * 1000 + r[6].microsecond // 1000,
                              r[7] is not None)
            for r in rows}


def _live_note(notes: dict[int, DbNote], note_id: int | None) -> DbNote | None:
    note = notes.get(note_id) if note_id is not None else None
    return None if note is None or note.deleted else note


def ancestors(notes: dict[int, DbNote], note_id: int) -> list[int]:
    """Live ancestors, root first; the chain ends at a deleted or missing parent or a cycle."""
    chain: list[int] = []
    seen = {note_id}
    current = _live_note(notes, note_id)
    while current is not None and current.parent_id is not None and current.parent_id not in seen:
        current = _live_note(notes, current.parent_id)
        if current is not None:
            chain.append(current.id)
            seen.add(current.id)
    return chain[::-1]


def _created(ms: int) -> str:
    moment = _EPOCH + dt.timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}+00:00"


def expected_bare(notes: dict[int, DbNote], note: DbNote, *, focus: bool) -> dict[str, Any]:
    """The BareNote fields of ``note`` from the database now (docs/doughnut.md), relation left out."""
    def ref(other: DbNote) -> dict[str, str]:
        return {"uri": f"/n{other.id}", "title": other.title}

    out: dict[str, Any] = {"uri": f"/n{note.id}"}
    parent, target = _live_note(notes, note.parent_id), _live_note(notes, note.target_id)
    if note.target_id is not None:
        if parent is not None:
            out["subjectUriAndTitle"] = ref(parent)
        out["predicate"] = note.title
        if target is not None:
            out["objectUriAndTitle"] = ref(target)
    else:
        out["title"] = note.title
        if parent is not None:
            out["parentUriAndTitle"] = ref(parent)
    if note.details is not None:
        raw = note.details.encode()
        if focus or len(raw) <= TRUNCATE_BYTES:
            out["details"] = note.details
        else:
            out["details"] = raw[:TRUNCATE_BYTES].decode("utf-8", "ignore") + "..."
            out["detailsTruncated"] = True
    out["createdAt"] = _created(note.created_ms)
    return out


_FOCUS_ONLY = ("relationToFocusNote", "contextualPath", "children", "priorSiblings",
               "youngerSiblings", "inboundReferences")


def _uri_id(value: str) -> int:
    return int(value.removeprefix("/n"))


def _relation_problem(notes: dict[int, DbNote], focus: DbNote, other: DbNote, relation: str,
                      path: list[int]) -> str | None:
    """Relations that name the shown note's own place (its parent, target or siblings): an edit of
    that place is an event on the shown note, so §5 makes them exact too."""
    same_parent = other.parent_id == focus.parent_id and focus.parent_id is not None
    ok = {
        "Parent": other.id == focus.parent_id,
        "Object": other.id == focus.target_id,
        "Child": other.parent_id == focus.id,
        "InboundReference": other.target_id == focus.id,
        "PriorSibling": same_parent and other.order_key < focus.order_key,
        "YoungerSibling": same_parent and other.order_key > focus.order_key,
        "AncestorInContextualPath": other.id in path,
        # a descendant below the children (focus -> child -> ... ); within the wavefront's
        # depth 3 every note between is the shown note's parent (in dep) or a child of the focus
        "GrandChild": other.parent_id != focus.id and focus.id in ancestors(notes, other.id),
    }.get(relation, True)
    return None if ok else f"/n{other.id} is no longer {relation} of /n{focus.id}"


def content_problems(notes: dict[int, DbNote], focus_id: int, result_json: bytes) -> list[str]:
    """What the result shows that differs from the database now, for content §5 covers."""
    focus = _live_note(notes, focus_id)
    if focus is None:
        return [f"focus /n{focus_id} is deleted or gone but has a snapshot"]
    try:
        result = check_result(result_json, focus_id)
    except AssertionError as err:
        return [f"malformed result: {err}"]
    problems = []
    path = ancestors(notes, focus_id)
    shown = [result["focusNote"], *result["relatedNotes"]]
    for item in shown:
        note_id = _uri_id(item["uri"])
        note = _live_note(notes, note_id)
        if note is None:
            problems.append(f"shows deleted or missing note /n{note_id}")
            continue
        got = {k: v for k, v in item.items() if k not in _FOCUS_ONLY}
        want = expected_bare(notes, note, focus=item is result["focusNote"])
        if got != want:
            keys = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            problems.append(f"/n{note_id} differs in {keys}: shown "
                            f"{ {k: got.get(k) for k in keys} } now { {k: want.get(k) for k in keys} }")
        if item is not result["focusNote"]:
            problem = _relation_problem(notes, focus, note, item["relationToFocusNote"], path)
            if problem:
                problems.append(problem)
    fnote = result["focusNote"]
    if [_uri_id(u) for u in fnote["contextualPath"]] != path:
        problems.append(f"contextualPath {fnote['contextualPath']} but the ancestors are "
                        f"{[f'/n{i}' for i in path]}")
    lists = {"children": "Child", "priorSiblings": "PriorSibling",
             "youngerSiblings": "YoungerSibling", "inboundReferences": "InboundReference"}
    for name, relation in lists.items():
        for uri in fnote[name]:
            other = _live_note(notes, _uri_id(uri))
            if other is not None and (p := _relation_problem(notes, focus, other, relation, path)):
                problems.append(f"{name}: {p}")
    return problems


@dataclass
class CheckReport:
    checked: int = 0
    expected: int = 0
    stale: dict[str, list[str]] = field(default_factory=dict)  # snapshot key -> problems
    missing: list[str] = field(default_factory=list)  # keys a live note lacks
    envelopes: dict[str, Envelope] = field(default_factory=dict)

    @property
    def bad(self) -> int:
        return len(self.stale) + len(self.missing)

    def summary(self, limit: int = 12) -> str:
        lines = [f"{self.checked} snapshots checked ({self.expected} expected): "
                 f"{len(self.stale)} stale, {len(self.missing)} missing"]
        for key, problems in list(self.stale.items())[:limit]:
            lines.append(f"  {key}: {'; '.join(problems[:4])}")
        lines += [f"  missing {key}" for key in self.missing[:limit]]
        return "\n".join(lines)


def snapshot_values(client: redis.Redis, prefix: str) -> dict[str, bytes]:
    keys = sorted(client.scan_iter(match=f"{prefix}:snap:*", count=1000))
    return {key.decode(): value for key, value in zip(keys, mget(client, keys), strict=True)
            if value is not None}


def check_snapshots(engine: Engine, store: SnapshotStore, settings: Settings,
                    service: ContextService) -> CheckReport:
    """Every snapshot under the store's prefix against the database now.

    A snapshot is *stale* when its envelope does not match its key or the running configuration,
    its focus is deleted or gone, or anything it shows differs from the database: a shown note
    deleted; a shown note's title/predicate, details (truncated as the contract says), parent /
    subject / object reference or createdAt; the focus's contextualPath; or a relation that names
    the shown note's own place (Parent, Child, Object, siblings, InboundReference, ancestors,
    GrandChild). Which notes were *picked* (sampling drift) is not checked. Every live note must
    have every configured variant (*missing* otherwise).
    """
    notes = load_notes(engine)
    report = CheckReport()
    wanted = {store.keys.snapshot(n.id, v.strategy, v.seed, v.limit)
              for n in notes.values() if not n.deleted for v in variants(settings)}
    report.expected = len(wanted)
    values = snapshot_values(store.redis, store.keys.prefix)
    report.missing = sorted(wanted - set(values))
    fingerprints = {s: config_hash(s, service.params, service.counter.name)
                    for s in settings.strategies_for("tree")}
    for key, value in values.items():
        report.checked += 1
        env = decode_envelope(value)
        if env is None:
            report.stale[key] = ["undecodable envelope"]
            continue
        report.envelopes[key] = env
        problems = []
        own = store.keys.snapshot(env.note_id, env.strategy, env.seed, env.key.token_limit)
        if own != key:
            problems.append(f"envelope of {own} stored under this key")
        if env.config_hash != fingerprints.get(env.strategy):
            problems.append("configHash of another configuration")
        problems += content_problems(notes, env.note_id, env.result_json)
        if problems:
            report.stale[key] = problems
    return report


def live_drift(service: ContextService, envelopes: Iterable[Envelope]) -> int:
    """How many snapshots differ byte for byte from a live compute with their own strategy, seed,
    tokenLimit and ``asOf`` (sampling drift included; informational)."""
    by_strategy: dict[str, list[tuple[Envelope, Request]]] = defaultdict(list)
    for env in envelopes:
        by_strategy[env.strategy].append((env, Request(
            env.note_id, env.seed, env.max_token_limit, env.as_of_ms,
            traversal_token_limit=env.max_token_limit)))
    differing = 0
    for strategy, pairs in by_strategy.items():
        for start in range(0, len(pairs), 400):
            chunk = pairs[start : start + 400]
            results = service.compute_many([r for _, r in chunk], strategy).results
            for env, request in chunk:
                outcome = results[request]
                live = None if isinstance(outcome, GraphRagError) else outcome.to_json()
                if live != env.result_json:
                    differing += 1
    return differing


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
    """Nothing dirty, no drain holding its lock, nothing queued, reserved or running."""
    return (dirty.size() == 0 and not drain_lock_tokens(store.redis, store.keys)
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
        return (f"dirty {dirty.size()}, drain lock "
                f"{bool(drain_lock_tokens(store.redis, store.keys))}, broker backlog "
                f"{broker.backlog()} ({Counter(s.task for s in broker.unacked())})\n{details()}")

    wait_until(steady, timeout_s=timeout_s, what="quiescence (nothing dirty, queued or running)",
               details=why, interval_s=0.1)
    return time.monotonic() - started


# -- a private redis-server -----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """``redis-server`` on a free port, no persistence: a restart comes back empty (flushed)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is required by the crash tests but is not on PATH", pytrace=False)
        self.starts += 1
        log = (self.folder / f"redis-{self.starts}.log").open("ab")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--daemonize", "no", "--dir", str(self.folder)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        probe = redis.Redis.from_url(self.url(0), socket_timeout=1, socket_connect_timeout=1)

        def answers() -> bool:
            try:
                return bool(probe.ping())
            except redis.RedisError:
                return False

        try:
            wait_until(answers, timeout_s=10, what=f"redis-server answers on port {self.port}",
                       details=lambda: (self.folder / f"redis-{self.starts}.log").read_text())
        finally:
            probe.close()
        return self

    def kill9(self) -> None:
        """SIGKILL the server (and reap it)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    stop = kill9


# -- a TCP proxy in front of MariaDB -------------------------------------------------------------------
class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``upstream``; :meth:`cut` closes every connection and refuses
    new ones (nothing listens), :meth:`restore` listens on the same port again."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream, self.port = upstream, free_port()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self.accepted = 0

    def start(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True,
                                  name="proxy-accept")
        thread.start()
        self._threads.append(thread)
        return self

    restore = start

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._sockets |= {client, upstream}
                self.accepted += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True,
                                 name="proxy-pump").start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(src)
            self._drop(dst)

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()

    def cut(self) -> None:
        """Close the listener and every proxied connection: the database is unreachable."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets = list(self._sockets)
        if listener is not None:
            listener.close()
        for sock in sockets:
            self._drop(sock)
        for thread in self._threads:
            thread.join(timeout=2)
        self._threads.clear()

    close = cut


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
    worker.app worker`` process groups) and the HTTP app in-process, on the ``engines`` chosen."""

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
