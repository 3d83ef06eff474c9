"""Children and referrer lists: sibling order, live members only, and the same lists whether
MariaDB packs them into one GROUP_CONCAT string per owner or the driver reads a row per member."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import URL, Engine

from graphrag import GraphView, Need
from storage.database import open_engine
from storage.profiles.doughnut_2025 import Doughnut2025 as NoteStore
from tests.conftest import new_store, url_string
from tests.storage.graphs import load_graph
from tests.support import Graph

PARENT, HUB, EMPTY = 1, 2, 3


def big_graph() -> Graph:
    """A parent of 3,000 children (equal, negative and huge sibling orders, every 7th deleted) and
    a hub of 2,000 link notes (every 5th deleted); note 3 has neither."""
    g = Graph()
    for note_id in (PARENT, HUB, EMPTY):
        g.add(note_id)
    for k in range(3_000):
        order = (k % 11) * 10**15 - 5 * 10**14 if k % 3 else 42
        g.add(100 + k, parent_id=PARENT, sibling_order=order, deleted=k % 7 == 0)
    for k in range(2_000):
        g.add(10_000 + k, parent_id=EMPTY + 1000, target_id=HUB, deleted=k % 5 == 0)
    return g


def expected(g: Graph) -> tuple[list[int], list[int]]:
    kids = sorted((n for n in g.notes.values() if n.parent_id == PARENT and not n.deleted),
                  key=lambda n: (n.skeleton().sibling_order, n.id))
    refs = sorted(n.id for n in g.notes.values() if n.target_id == HUB and not n.deleted)
    return [n.id for n in kids], refs


def read_lists(store: NoteStore) -> GraphView:
    view = GraphView()
    with store.batch() as load:
        load(view, Need(children=frozenset({PARENT, HUB, EMPTY}),
                        inbound=frozenset({PARENT, HUB, EMPTY})))
    return view


def assert_lists(view: GraphView, g: Graph) -> None:
    kids, refs = expected(g)
    assert list(view.children(PARENT)) == kids and list(view.inbound(HUB)) == refs
    assert view.children(EMPTY) == () and view.inbound(EMPTY) == () and view.children(HUB) == ()


def test_lists_are_live_members_in_order(store: NoteStore) -> None:
    g = big_graph()
    load_graph(store, g)
    assert_lists(read_lists(store), g)


class Statements:
    def __init__(self, engine: Engine) -> None:
        self.seen: list[str] = []
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        self.seen.append(statement)


@pytest.mark.mariadb
def test_mariadb_packs_each_list_into_one_row(mariadb_store: NoteStore) -> None:
    g = big_graph()
    load_graph(mariadb_store, g)
    statements = Statements(mariadb_store.engine)
    assert_lists(read_lists(mariadb_store), g)
    assert len(statements.seen) == 2 and all("GROUP_CONCAT" in s for s in statements.seen)


@pytest.mark.mariadb
@pytest.mark.parametrize("cap", [64, 65, 66, 67, 1000])
def test_a_list_cut_short_by_the_session_cap_is_read_again_row_by_row(
    mariadb_store: NoteStore, cap: int
) -> None:
    """Whichever byte the cap cuts at (after a separator, inside a number), the list is re-read."""
    g = big_graph()
    load_graph(mariadb_store, g)

    def tiny_cap(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET SESSION group_concat_max_len = {cap}")

    engine = mariadb_store.engine
    engine.dispose()
    event.listen(engine, "connect", tiny_cap)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT @@session.group_concat_max_len")).scalar_one() == cap
    statements = Statements(engine)
    assert_lists(read_lists(mariadb_store), g)
    fallbacks = [s for s in statements.seen if "GROUP_CONCAT" not in s]
    assert len(fallbacks) == 2, statements.seen  # the parent's and the hub's lists, once each


@pytest.fixture
def mariadb_store(mariadb_url: URL) -> Iterator[NoteStore]:
    """A store on a fresh MariaDB database (GROUP_CONCAT packing is the MySQL/MariaDB path)."""
    engine = open_engine(url_string(mariadb_url))
    store = new_store(engine)
    try:
        yield store
    finally:
        engine.dispose()
