"""One contract for the :class:`service.ports.NoteSource` port, run on every implementation of the
tree model: in memory, the ``doughnut-2025`` profile on SQLite and on MariaDB.

Each answers the same needs with the same data: live children in (sibling_order, id) order, live
referrers by id, rows whose parent/target references name only live notes, ancestor chains that
stop at cycles and dangling ids, absent ids recorded as absent; and the same edit scopes, pages and
counts. So a use case tested fast against the in-memory source behaves the same on a database.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphrag import (
    CharsCounter,
    DatabaseUnavailable,
    GraphView,
    Need,
    Request,
    StrategyParams,
    strategy_names,
)
from service.context import ContextService
from service.full_rebuild import rebuild_pieces
from service.rebuild import rebuild
from storage.database import open_engine
from storage.memory import MemoryState
from storage.memory_cache import MemoryCache
from storage.memory_source import MemoryTree
from tests.conftest import BACKENDS, backend_engine, new_store
from tests.redis.readers import DOWN_DATABASE_URL
from tests.storage.graphs import CHAIN, CYCLIC, SIBLING_PARENT, SIBLINGS_IN_ORDER, hand_graph, load_graph
from tests.support import NOW_MS

FOCI = (1, 2, 10, 12, 20, 55, 60, 70, 80, 83, 84, CHAIN[-1], SIBLING_PARENT, 307)


@pytest.fixture(params=["memory", *BACKENDS])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from _source(request.param, tmp_path, hand_graph())


@pytest.fixture(params=["memory", *BACKENDS])
def linked_links(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The hand graph plus link notes pointing at link notes (56 -> 54 -> 50, 57 -> 56)."""
    graph = hand_graph()
    graph.add(56, parent_id=1, target_id=54, title=":links a link")
    graph.add(57, parent_id=1, target_id=56, title=":links a link to a link")
    yield from _source(request.param, tmp_path, graph)


def _source(backend: str, tmp_path: Path, graph: Any) -> Iterator[Any]:
    if backend == "memory":
        yield MemoryTree(graph.records())
        return
    with backend_engine(backend, tmp_path) as engine:
        store = new_store(engine)
        load_graph(store, graph)
        yield store


def loaded(source: Any, need: Need) -> GraphView:
    """``need`` loaded completely (a long ancestor chain may take several rounds)."""
    view = GraphView()
    with source.batch() as load:
        for _ in range(10):
            if not (missing := view.missing(need)):
                break
            load(view, missing)
    return view


def test_the_model_is_the_tree(source: Any) -> None:
    assert source.model == "tree"
    source.check()
    source.ping()


def test_lists_are_live_members_in_order(source: Any) -> None:
    view = loaded(source, Need(children=frozenset({2, SIBLING_PARENT, 50, 9999, 7777}),
                               inbound=frozenset({10, 50, 9999})))
    assert view.children(SIBLING_PARENT) == SIBLINGS_IN_ORDER
    assert view.children(2) == (12, 10, 11, 13, 14, 15, 16)  # (order, id); deleted 50 left out
    assert view.children(50) == (55,)  # a live child of a deleted note is still listed
    assert view.inbound(10) == (41, 43, 44, 66)  # deleted link 53 left out
    assert view.children(9999) == (70,)  # a dangling parent id still lists its children
    assert view.children(7777) == () and view.inbound(9999) == ()


def test_rows_refer_only_to_live_notes_and_absent_ids_read_as_absent(source: Any) -> None:
    view = loaded(source, Need(rows=frozenset({54, 55, 70, 71, 9999})))
    row54 = view.row(54)
    assert row54 is not None and row54.is_link and row54.target is None  # its target is deleted
    row55 = view.row(55)
    assert row55 is not None and row55.parent is None
    row71 = view.row(71)
    assert row71 is not None and row71.target is None and row71.parent is not None
    assert view.row(9999) is None and view.note(9999) is None


def test_ancestor_chains_stop_at_cycles_and_dangling_ids(source: Any) -> None:
    view = loaded(source, Need(ancestors=frozenset({CHAIN[-1], 82, 83, 72})))
    assert view.ancestors(CHAIN[-1]) == list(CHAIN[:-1])
    assert set(view.ancestors(82)) <= set(CYCLIC)
    assert view.ancestors(83) == []
    assert view.ancestors(72) == [70]


@pytest.mark.parametrize("strategy", strategy_names("tree"))
def test_every_strategy_gives_the_same_bytes_on_every_source(source: Any, strategy: str,
                                                             tmp_path: Path) -> None:
    reference = ContextService(MemoryTree(hand_graph().records()), CharsCounter(), StrategyParams())
    service = ContextService(source, CharsCounter(), StrategyParams())
    requests = [Request(f, 3, 900, NOW_MS, 2_000) for f in FOCI]
    got = service.compute_many(requests, strategy).results
    want = reference.compute_many(requests, strategy).results
    for request in requests:
        a, b = got[request], want[request]
        assert type(a) is type(b), request
        if not isinstance(a, Exception):
            assert a.to_json() == b.to_json(), request


def test_edit_scope_is_the_subtree_and_the_links_into_it(source: Any) -> None:
    assert source.edit_scope([50]) == {50, 51, 52, 54, 55}
    assert source.edit_scope([10]) == {10, 30, 31, 32, 33, 40, 41, 43, 44, 53, 66}


def test_edit_scope_holds_the_links_whose_object_it_deletes_or_restores(linked_links: Any) -> None:
    """56 points at 54, a link into 50's subtree: 54 goes and comes back with the subtree, and so
    does 56's object. 57's object (56) stays, so 57 is not in the scope."""
    assert linked_links.edit_scope([50]) == {50, 51, 52, 54, 55, 56}


def test_paging_and_counts(source: Any) -> None:
    live = sorted(i for i, n in hand_graph().notes.items() if not n.deleted)
    pages, after = [], 0
    while page := source.live_ids_after(after, 7):
        pages += page
        after = page[-1]
    assert pages == live
    assert source.count_live() == len(live)
    assert source.any_note()


def test_workspaces_hold_every_live_note_once_and_the_full_path_writes_the_batched_bytes(
    source: Any,
) -> None:
    live = sorted(i for i, n in hand_graph().notes.items() if not n.deleted)
    handed = list(source.workspaces(7))
    pieces = [p.ids for p in handed]
    assert sorted(i for p in pieces for i in p) == live
    for k, piece in enumerate(handed[:-1]):
        assert list(source.workspaces(7, after=piece.cursor)) == handed[k + 1:]
    assert all(0 < len(p) <= 7 and p == sorted(p) for p in pieces)
    service = ContextService(source, CharsCounter(), StrategyParams())
    stored = []
    for full in (False, True):
        state = MemoryState()
        options: dict[str, Any] = {"strategies": strategy_names(model="tree"), "seeds": (0,),
                                   "max_token_limit": 2000, "now_ms": NOW_MS, "batch_size": 5}
        if full:
            rebuild_pieces(service, MemoryCache(state), pieces, **options)
        else:
            rebuild(service, MemoryCache(state), live, **options)
        stored.append({k: v for k, (v, _) in state.snapshots.items()})
    assert stored[0] == stored[1] and stored[0]


def test_an_unreachable_database_is_unavailable() -> None:
    from storage.profiles.doughnut_2025 import Doughnut2025

    engine = open_engine(DOWN_DATABASE_URL)
    down = MemoryTree()
    down.down = True
    try:
        for src in (Doughnut2025(engine), down):
            with pytest.raises(DatabaseUnavailable):
                src.live_ids_after(0, 10)
            with pytest.raises(DatabaseUnavailable), src.batch() as load:
                load(GraphView(), Need(rows=frozenset({1})))
    finally:
        engine.dispose()
