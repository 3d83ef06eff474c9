"""Test support: an in-memory Doughnut graph that loads a GraphView without any database."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from graphrag import (
    CharsCounter,
    Costing,
    GraphView,
    Need,
    Outcome,
    Ref,
    Request,
    Row,
    Skeleton,
    StrategyParams,
    TokenCounter,
    computation,
    run_batch,
)
from storage.records import TreeNote

NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY_MS = 86_400_000
#: Any non-NULL ``deleted_at`` means deleted; a real moment, since MariaDB's TIMESTAMP(3) rejects
#: the epoch.
DELETED_AT = dt.datetime(2025, 6, 1, 12, 0, 0, 123000)


@dataclass
class Note:
    id: int
    parent_id: int | None = None
    target_id: int | None = None
    sibling_order: int | None = None
    title: str | None = None
    details: str | None = None
    created_at_ms: int = NOW_MS - 30 * DAY_MS
    deleted: bool = False

    def skeleton(self) -> Skeleton:
        order = self.sibling_order if self.sibling_order is not None else self.id * 1000
        return Skeleton(self.id, self.parent_id, self.target_id, order, self.deleted)


@dataclass
class Graph:
    """Notes by id; ``loads`` records every Need the algorithms asked for."""

    notes: dict[int, Note] = field(default_factory=dict)
    loads: list[Need] = field(default_factory=list)

    def add(self, note_id: int, **kw: Any) -> Note:
        note = Note(note_id, **kw)
        self.notes[note_id] = note
        return note

    def records(self) -> list[TreeNote]:
        """The graph as note records (for loading into a database or an in-memory source)."""
        base = dt.datetime(1970, 1, 1)
        return [
            TreeNote(
                id=n.id, title=self.title(n), parent_id=n.parent_id, target_note_id=n.target_id,
                sibling_order=n.skeleton().sibling_order, details=n.details,
                created_at=base + dt.timedelta(milliseconds=n.created_at_ms),
                deleted_at=DELETED_AT if n.deleted else None,
            )
            for n in self.notes.values()
        ]

    def title(self, n: Note) -> str:
        if n.title is not None:
            return n.title
        return f":link {n.id}" if n.target_id is not None else f"note {n.id}"

    def _ref(self, note_id: int | None) -> Ref | None:
        n = self.notes.get(note_id) if note_id is not None else None
        return None if n is None or n.deleted else Ref(n.id, self.title(n))

    def row(self, n: Note) -> Row:
        return Row(n.id, self.title(n), n.details, n.created_at_ms, n.target_id is not None,
                   self._ref(n.parent_id), self._ref(n.target_id))

    def load(self, view: GraphView, need: Need) -> None:
        self.loads.append(need)
        for i in need.rows:
            n = self.notes.get(i)
            if n is None:
                view.put_absent_rows([i])
            else:
                view.put_row(n.skeleton(), self.row(n))
        for i in need.notes | need.ancestors:
            self._put_chain(view, i)
        for p in need.children:
            view.put_children(p, [n.skeleton() for n in self.notes.values()
                                  if n.parent_id == p and not n.deleted])
        for t in need.inbound:
            view.put_inbound(t, [n.skeleton() for n in self.notes.values()
                                 if n.target_id == t and not n.deleted])

    def _put_chain(self, view: GraphView, start: int) -> None:
        seen: set[int] = set()
        current: int | None = start
        while current is not None and current not in seen:
            seen.add(current)
            n = self.notes.get(current)
            if n is None:
                view.put_absent([current])
                return
            view.put_skeletons([n.skeleton()])
            current = n.parent_id


def compute_all(
    graph: Graph,
    requests: Iterable[Request],
    strategy: str = "wavefront",
    *,
    counter: TokenCounter | None = None,
    params: StrategyParams | None = None,
    preloaded: bool = False,
) -> tuple[GraphView, dict[Request, Any]]:
    """The batch's view and results; ``preloaded``: the view holds the whole graph (and every
    dangling id up to 3 past the largest) before the runs start, and a run that asks fails."""
    view = GraphView()
    truncate = (params or StrategyParams()).details_truncate_bytes
    costing = Costing(view, counter or CharsCounter(), truncate)
    jobs = {r: computation(strategy, costing, params or StrategyParams(), r) for r in requests}
    if not preloaded:
        return view, run_batch(jobs, view, lambda need: graph.load(view, need))
    everything = frozenset(range(1, max(graph.notes) + 4))
    graph.load(view, Need(everything, everything, everything, everything, everything))

    def asked(need: Need) -> None:
        raise AssertionError(f"a preloaded run asked for {need}")
    return view, run_batch(jobs, view, asked)


def compute_preloaded(graph: Graph, request: Request, strategy: str, *,
                      counter: TokenCounter | None = None) -> Any:
    """One computation that never stops on missing data (``compute_all(preloaded=True)``)."""
    return compute_all(graph, [request], strategy, counter=counter, preloaded=True)[1][request]


def compute(
    graph: Graph,
    focus: int,
    strategy: str = "wavefront",
    *,
    token_limit: int = 5000,
    seed: int = 0,
    now_ms: int = NOW_MS,
    counter: TokenCounter | None = None,
    params: StrategyParams | None = None,
    traversal_token_limit: int | None = None,
) -> Outcome:
    """One computation; raises the note's error."""
    request = Request(focus, seed, token_limit, now_ms, traversal_token_limit)
    _, results = compute_all(graph, [request], strategy, counter=counter, params=params)
    result = results[request]
    if isinstance(result, Exception):
        raise result
    assert isinstance(result, Outcome)
    return result


def drain_leases(redis: Any, keys: Any) -> set[bytes]:
    """Every lease a drain holds right now: the fields of ``<prefix>:dirty:{d<shard>}:leases`` not yet
    expired (by this machine's clock, which is Redis's here), each as ``<key> <id> <expiry> <score>``
    (a renewal is a new one)."""
    now_ms, held = time.time() * 1000, set()
    for name in redis.scan_iter(match=keys.dirty_leases(0).replace("{d0}", "{d*}"), count=1000):
        key = name if isinstance(name, bytes) else name.encode()
        for note_id, value in redis.hgetall(name).items():
            if int(value.split()[0]) > now_ms:
                held.add(b" ".join((key, note_id, value)))
    return held
