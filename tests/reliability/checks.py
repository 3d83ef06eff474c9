"""The content check of the reliability suites (docs/algorithms.md).

:func:`check_snapshots` compares every stored snapshot against the *current* database, for the content
docs/algorithms.md makes exact (see its docstring), plus the snapshots every live note must have;
:func:`live_drift` counts the snapshots that differ byte for byte from a live compute at their
``asOf`` (sampling drift included: informational only).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import redis
from sqlalchemy import text
from sqlalchemy.engine import Engine

from graphrag import GraphRagError, Request, config_hash
from service.context import ContextService
from service.decoding import decode_envelope
from service.envelope import Envelope
from storage.redis.cache import RedisCache as SnapshotStore
from storage.redis.client import mget
from tests.reliability.support import check_result
from worker.settings import Settings

TRUNCATE_BYTES = 150
_FOCUS = re.compile(r":snap:\{(\d+)\}:")
_EPOCH = dt.datetime(1970, 1, 1)


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

    def bad_foci(self) -> list[int]:
        """The focus ids of the stale and missing snapshots, in key order."""
        keys = [*self.stale, *self.missing]
        return list(dict.fromkeys(int(m.group(1)) for k in keys if (m := _FOCUS.search(k))))

    def summary(self, limit: int = 12, history: Callable[[int], list[str]] | None = None) -> str:
        """What is wrong; with ``history`` (the edit log's :meth:`Doughnut.history`), also every
        edit that changed or named each bad snapshot's focus."""
        lines = [f"{self.checked} snapshots checked ({self.expected} expected): "
                 f"{len(self.stale)} stale, {len(self.missing)} missing"]
        for key, problems in list(self.stale.items())[:limit]:
            lines.append(f"  {key}: {'; '.join(problems[:4])}")
        lines += [f"  missing {key}" for key in self.missing[:limit]]
        for focus in self.bad_foci()[:limit] if history is not None else ():
            edits = history(focus)
            lines.append(f"  edits that changed or named note {focus}: {len(edits) or 'none'}")
            lines += [f"    {edit}" for edit in edits]
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
