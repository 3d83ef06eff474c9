"""How many SQL statements a batch costs, how many ids each binds, and how many rows it reads.

Statements are observed with SQLAlchemy's ``before_cursor_execute`` event on the engine. The rows a
statement returned are counted by running the recorded statement again with its recorded parameters
on a raw DBAPI cursor (``cursor.rowcount`` is -1 for SELECTs on SQLite); the data is read-only here,
so the second run returns exactly what the service read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from graphrag import CharsCounter, GraphView, Need, Outcome, Request, StrategyParams
from service.context import ContextService
from storage.profiles.doughnut_2025 import Doughnut2025 as NoteStore
from tests.conftest import BACKENDS, backend_engine, new_store
from tests.storage.graphs import load_graph
from tests.support import NOW_MS, Graph, compute

IN_CHUNK = 100
STRATEGIES = ("wavefront", "layered")
_PLACEHOLDER = r"(?:\?|%s|%\([^()]+\)s|:\w+)"
_IN_LIST = re.compile(rf"\bIN\s*\(\s*({_PLACEHOLDER}(?:\s*,\s*{_PLACEHOLDER})*)\s*\)", re.IGNORECASE)


@dataclass
class Executed:
    statement: str
    parameters: Any

    def in_list_sizes(self) -> list[int]:
        return [len(re.findall(_PLACEHOLDER, m.group(1))) for m in _IN_LIST.finditer(self.statement)]

    @property
    def reads_text(self) -> bool:
        """Selects what is rendered (titles, details), not only the integer skeleton."""
        return "description" in self.statement or "topic_constructor" in self.statement


@dataclass
class Recorder:
    """Every statement executed on an engine while attached."""

    engine: Engine
    executed: list[Executed] = field(default_factory=list)

    def _before(
        self,
        _conn: Connection,
        _cursor: Any,
        statement: str,
        parameters: Any,
        _context: Any,
        _executemany: bool,
    ) -> None:
        self.executed.append(Executed(statement, parameters))

    def __enter__(self) -> Recorder:
        event.listen(self.engine, "before_cursor_execute", self._before)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.engine, "before_cursor_execute", self._before)

    @property
    def note_reads(self) -> list[Executed]:
        return [e for e in self.executed if re.search(r"\bnote\b", e.statement)]

    def rows_returned(self, executed: Executed) -> int:
        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute(executed.statement, executed.parameters)
            return len(cursor.fetchall())
        finally:
            raw.close()


class CountingStore(NoteStore):
    """A NoteStore that records each round's Need, to bound the statements from the needs."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine, in_chunk=IN_CHUNK)
        self.needs: list[Need] = []

    @contextmanager
    def batch(self) -> Iterator[Any]:
        with super().batch() as load:

            def recording(view: GraphView, need: Need) -> None:
                self.needs.append(need)
                load(view, need)

            yield recording

    def statement_bound(self) -> int:
        """One statement per kind per chunk of at most IN_CHUNK ids, summed over the rounds."""
        return sum(
            math.ceil(len(ids) / IN_CHUNK)
            for need in self.needs
            for ids in (need.rows, need.ancestors, need.notes, need.children, need.inbound)
        )


# -- graphs -----------------------------------------------------------------------------------------
PARENTS = tuple(range(10, 40))
LINKS = 300


def child_id(parent_index: int, k: int) -> int:
    return 1000 + parent_index * 100 + k


def wide_graph() -> Graph:
    """3 notebooks, 30 parents x 100 children, 300 link notes across them: 3,333 notes."""
    g = Graph()
    for root in (1, 2, 3):
        g.add(root, title=f"notebook {root}")
    for p, pid in enumerate(PARENTS):
        g.add(pid, parent_id=1 + p % 3, title=f"topic {p}")
        for k in range(100):
            g.add(child_id(p, k), parent_id=pid, details="d" * (k % 200))
    for i in range(LINKS):
        src, tgt = 1000 + (i * 37) % 3000, 1000 + (i * 101 + 13) % 3000
        g.add(5000 + i, parent_id=src, target_id=tgt, title=f":relates {i}")
    return g


CROWDED_PARENT = 2
CROWD = 5000


def crowded_graph() -> Graph:
    """One parent with 5,000 children (and a grandparent, and a few inbound links)."""
    g = Graph()
    g.add(1, title="notebook")
    g.add(CROWDED_PARENT, parent_id=1, title="crowded")
    for k in range(CROWD):
        g.add(10_000 + k, parent_id=CROWDED_PARENT, details=f"child {k} " + "w" * (k % 300))
    for i in range(20):
        g.add(20_000 + i, parent_id=10_000 + i * 97, target_id=10_000 + CROWD // 2)
    return g


def batch(n: int) -> list[int]:
    """``n`` focus notes spread over all 30 parents."""
    return [child_id(i % len(PARENTS), (i * 7) % 100) for i in range(n)]


@pytest.fixture(scope="module", params=BACKENDS)
def wide(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, Graph]]:
    graph = wide_graph()
    path: Path = tmp_path_factory.mktemp("wide")
    with backend_engine(request.param, path) as engine:
        load_graph(new_store(engine), graph)
        yield engine, graph


@pytest.fixture(scope="module", params=BACKENDS)
def crowded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, Graph]]:
    graph = crowded_graph()
    with backend_engine(request.param, tmp_path_factory.mktemp("crowded")) as engine:
        load_graph(new_store(engine), graph)
        yield engine, graph


def run_batch_recorded(
    engine: Engine, focus_ids: list[int], strategy: str, token_limit: int = 5000
) -> tuple[Recorder, CountingStore, dict[Request, Any]]:
    store = CountingStore(engine)
    store.check()  # the start-up column inspection, before counting
    svc = ContextService(store, CharsCounter(), StrategyParams())
    requests = [Request(i, 0, token_limit, NOW_MS) for i in focus_ids]
    with Recorder(engine) as rec:
        results = svc.compute_many(requests, strategy).results
    return rec, store, results


# -- statement counts -------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_statement_count_does_not_grow_with_the_batch(wide: tuple[Engine, Graph], strategy: str) -> None:
    engine, _ = wide
    counts: dict[int, int] = {}
    for size in (10, 50, 100):
        focus_ids = batch(size)
        assert len(set(focus_ids)) == size
        rec, store, results = run_batch_recorded(engine, focus_ids, strategy)
        assert all(isinstance(r, Outcome) for r in results.values())
        statements = rec.note_reads
        counts[size] = len(statements)
        # every statement is one kind of need for one chunk of one round
        assert len(statements) <= store.statement_bound(), (len(statements), store.needs)
        assert len(rec.executed) == len(statements), "only reads of note are expected"
    print(f"\n{engine.dialect.name} {strategy}: statements per batch size {counts}")
    assert counts[100] < 100, counts
    assert counts[100] < 3 * counts[10], counts


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_in_list_binds_at_most_100_ids(wide: tuple[Engine, Graph], strategy: str) -> None:
    engine, _ = wide
    rec, _, _ = run_batch_recorded(engine, batch(100), strategy)
    sizes = [n for e in rec.note_reads for n in e.in_list_sizes()]
    assert sizes, "no IN statement was recognised"
    assert max(sizes) <= IN_CHUNK, sorted(sizes)[-5:]
    assert max(sizes) == IN_CHUNK, "a 100-note batch should fill at least one chunk"
    for e in rec.note_reads:  # all bound ids are accounted for by the IN lists (plus CTE literals)
        bound = len(e.parameters) if e.parameters else 0
        assert bound - sum(e.in_list_sizes()) <= 3, e.statement


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_batched_results_equal_the_in_memory_ones(wide: tuple[Engine, Graph], strategy: str) -> None:
    engine, graph = wide
    focus_ids = batch(100)[::9]
    _, _, results = run_batch_recorded(engine, focus_ids, strategy)
    for req, got in results.items():
        assert got.to_json() == compute(graph, req.focus_id, strategy).to_json(), req.focus_id


# -- rows read for a focus among 5,000 siblings -----------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("focus", [10_000, 10_000 + CROWD // 2, 10_000 + CROWD - 1])
def test_rendered_rows_read_are_bounded_by_what_can_be_shown(
    crowded: tuple[Engine, Graph], strategy: str, focus: int
) -> None:
    engine, graph = crowded
    rec, _, results = run_batch_recorded(engine, [focus], strategy)
    (outcome,) = results.values()
    assert isinstance(outcome, Outcome)
    assert outcome.to_json() == compute(graph, focus, strategy).to_json()
    text_rows = 0
    for e in rec.note_reads:
        rows = rec.rows_returned(e)
        if e.reads_text:
            text_rows += rows
        else:  # integer skeletons: the 5,000 siblings are read here, and only here
            assert "description" not in e.statement
    print(
        f"\n{engine.dialect.name} {strategy} focus {focus}: {len(rec.note_reads)} statements, "
        f"{text_rows} rendered rows, {len(outcome.picks)} related notes"
    )
    assert text_rows < 500, text_rows
    assert text_rows >= len(outcome.picks)


# -- rounds of the layered strategy at a large budget -----------------------------------------------
def test_layered_rounds_do_not_grow_with_the_notes_shown(crowded: tuple[Engine, Graph]) -> None:
    engine, _ = crowded
    rec, store, results = run_batch_recorded(engine, [CROWDED_PARENT], "layered", 100_000)
    (outcome,) = results.values()
    assert isinstance(outcome, Outcome) and len(outcome.picks) > 1000
    # 1,200 rows need at least 13 chunks of 100; allow several rounds per layer on top of that
    assert len(rec.note_reads) < 100, (len(store.needs), len(rec.note_reads))
