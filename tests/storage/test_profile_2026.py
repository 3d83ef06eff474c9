"""The ``doughnut-2026`` profile on SQLite and MariaDB: the same bytes as the in-memory oracle.

Random wiki graphs (two users' notebooks and a circle's, nested folders, deleted notes, notes without
a notebook, cross-notebook links, subscriptions, the bazaar, a hub, a crowded folder) are loaded into
each database; every focus is computed through the SQL profile and through the in-memory database of
tests/wiki_support.py (which answers each need as Doughnut's queries do) for several seeds, viewers,
depths and budgets: JSON and markdown must be equal byte for byte. Plus the batch's statement count
and the schema checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine

from graphrag import CharsCounter, DatabaseUnavailable, Request, SchemaMismatch, StrategyParams
from graphrag.wiki.model import Viewer
from service.context import ContextService
from storage.profiles import open_source
from storage.profiles.admin_2026 import create_tables, insert_rows
from storage.profiles.doughnut_2026 import Doughnut2026
from tests.conftest import BACKENDS, backend_engine
from tests.storage.wiki_rows import random_graph, table_rows
from tests.wiki_support import WikiGraph, result_of

VIEWERS = (None, Viewer(user_id=1), Viewer(user_id=2), Viewer(circle_id=1))
SEEDS = (None, 7, -(2**63))


@pytest.fixture(scope="module", params=BACKENDS)
def loaded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Engine, WikiGraph]]:
    graph = random_graph(11, notes=60)
    rows = table_rows(graph)
    with backend_engine(request.param, tmp_path_factory.mktemp("wiki")) as engine:
        create_tables(engine)
        insert_rows(engine, rows)
        yield engine, graph


def service(engine: Engine) -> ContextService:
    return ContextService(Doughnut2026(engine), CharsCounter(), StrategyParams())


def oracle(graph: WikiGraph, focus: int, limit: int, **kw: Any) -> bytes | type[Exception]:
    from graphrag.wiki.focus.render import result_json

    try:
        return result_json(result_of(graph, focus, limit, **kw))
    except Exception as err:
        return type(err)


@pytest.mark.parametrize("limit", [5, 300, 2000, 6000])
def test_every_focus_gives_the_oracles_bytes(loaded: tuple[Engine, WikiGraph], limit: int) -> None:
    engine, graph = loaded
    svc = service(engine)
    for seed in SEEDS:
        for viewer in VIEWERS:
            requests = [Request(f, seed, limit, 0, limit, viewer=viewer) for f in graph.notes]
            got = svc.compute_many(requests, "focus-context").results
            for request in requests:
                outcome = got[request]
                want = oracle(graph, request.focus_id, limit, seed=seed, viewer=viewer)
                if isinstance(want, type):
                    assert isinstance(outcome, want), (request, outcome)
                else:
                    assert outcome.to_json() == want, request


def test_depths_and_the_markdown_agree(loaded: tuple[Engine, WikiGraph]) -> None:
    from graphrag.wiki.focus.render import render_markdown

    engine, graph = loaded
    svc = service(engine)
    live = [i for i, n in graph.notes.items() if not n.deleted and n.notebook_id == 1]
    for depth in (1, 3):
        requests = [Request(f, 3, 2500, 0, 2500, max_depth=depth) for f in live]
        got = svc.compute_many(requests, "focus-context").results
        for request in requests:
            want = result_of(graph, request.focus_id, 2500, seed=3, max_depth=depth)
            assert got[request].markdown() == render_markdown(want, depth)


def statements(engine: Engine, foci: list[int]) -> int:
    """How many statements one batch computation of ``foci`` executes (after the schema check)."""
    source = Doughnut2026(engine)
    source.check()
    seen: list[str] = []

    def count(*args: Any) -> None:
        seen.append(args[2])

    event.listen(engine, "before_cursor_execute", count)
    try:
        svc = ContextService(source, CharsCounter(), StrategyParams())
        svc.compute_many([Request(f, None, 2000, 0, 2000) for f in foci], "focus-context")
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return len(seen)


def test_a_batch_costs_a_handful_of_statements_per_round(loaded: tuple[Engine, WikiGraph]) -> None:
    engine, graph = loaded
    foci = [i for i, n in graph.notes.items() if not n.deleted and n.notebook_id is not None]
    counts = {size: statements(engine, foci[:size]) for size in (1, len(foci))}
    assert counts[len(foci)] <= 3 * counts[1], counts  # not one set of statements per focus
    assert counts[len(foci)] < len(foci), counts


def test_auto_detects_the_2026_layout(loaded: tuple[Engine, WikiGraph]) -> None:
    engine, _ = loaded
    source = open_source(engine, "auto")
    assert (source.profile, source.model) == ("doughnut-2026", "wiki")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_database_without_the_link_cache_is_named(backend: str, tmp_path: Path) -> None:
    with backend_engine(backend, tmp_path) as engine:
        create_tables(engine)
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE note_wiki_title_cache"))
        with pytest.raises(SchemaMismatch) as info:
            Doughnut2026(engine).check()
        assert "note_wiki_title_cache" in str(info.value) and "\n" not in str(info.value)
        with pytest.raises(DatabaseUnavailable) as batch:
            service(engine).compute(Request(1, None, 2000, 0), "focus-context")
        assert "note_wiki_title_cache" in str(batch.value)


def test_sampled_statements_are_built_once_per_shape_and_bound_per_call() -> None:
    from storage.profiles import wiki_statements as sql

    seeded_user, bound = sql.referrers(7, 2, 5)
    assert sql.referrers(9, 3, 40)[0] is seeded_user and bound == {"limit": 5, "user": 2, "seed": "7"}
    assert sql.referrers(None, None, 5) == (sql.referrers(None, None, 6)[0], {"limit": 5})
    assert sql.referrers(None, None, 5)[0] is not seeded_user
    assert sql.folder_peers(1, 3)[0] is sql.folder_peers(2, 8)[0] is not sql.folder_peers(None, 3)[0]
    assert sql.root_peers(None, 3) == (sql.root_peers(None, 9)[0], {"limit": 3})
    assert sql.access(None, 4) == (sql.access(None, 5)[0], {"circle": 4})


def test_the_full_path_writes_the_batched_bytes_and_pieces_are_notebooks(
    loaded: tuple[Engine, WikiGraph],
) -> None:
    """On the database: pieces are the notebooks' live notes (cut at ``max_notes``) and every live
    note once; the full rebuild over them stores the bytes the batched rebuild stores."""
    from service.full_rebuild import rebuild_pieces
    from service.rebuild import rebuild
    from storage.memory import MemoryState
    from storage.memory_cache import MemoryCache

    engine, graph = loaded
    source = Doughnut2026(engine)
    handed = list(source.workspaces(9))
    pieces = [p.ids for p in handed]
    live = sorted(i for i, n in graph.notes.items() if not n.deleted)
    assert sorted(i for p in pieces for i in p) == live
    assert all(graph.notes[p.ids[-1]].notebook_id == p.notebook and len(p.ids) <= 9
               for p in handed)
    for k, piece in enumerate(handed[:-1]):
        assert list(source.workspaces(9, after=piece.cursor)) == handed[k + 1:]
    stored = []
    for full in (False, True):
        state = MemoryState()
        options: dict[str, Any] = {"strategies": ("focus-context",), "seeds": (7,),
                                   "max_token_limit": 3000, "now_ms": 1_790_000_000_000}
        if full:
            rebuild_pieces(service(engine), MemoryCache(state), pieces, batch_size=4, **options)
        else:
            rebuild(service(engine), MemoryCache(state), live, batch_size=4, **options)
        stored.append({k: v for k, (v, _) in state.snapshots.items()})
    assert stored[0] == stored[1] and stored[0]
