"""The adapters the benchmark reads and edits a generated database through, on SQLite and MariaDB.

Expected values are computed from the records inserted (independently of the SQL under test):
tree statistics, titles, live non-link ids; and the statement counter must see exactly the
statements run inside its block, by kind, and nothing after it.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.engine import Engine

from graphrag import CharsCounter, ConfigurationError, Request, StrategyParams
from service.context import ContextService
from storage.database import (
    NOTE_TEXT_LABELS,
    buffer_pool_bytes,
    counted_statements,
    create_database,
    database_name,
    server_version,
    statement_kind,
    with_database,
)
from storage.profiles import admin_2025, wiki_statements
from storage.profiles.doughnut_2025 import Doughnut2025
from storage.profiles.tables_2025 import TreeStatements, note_table
from storage.records import TreeNote

DELETED = dt.datetime(2025, 6, 1)


def _tree() -> list[TreeNote]:
    """Two notebooks: a head with four children (one deleted), a link hub with three referrers (one
    of them deleted), a second head with one child; titles with LIKE wildcards in them."""
    return [
        TreeNote(1, "head one", notebook_id=1),
        *(TreeNote(i, f"child {i}", parent_id=1, sibling_order=i, notebook_id=1) for i in (2, 3, 4)),
        TreeNote(5, "gone", parent_id=1, sibling_order=5, notebook_id=1, deleted_at=DELETED),
        TreeNote(6, ":related to", parent_id=2, target_note_id=4, notebook_id=1),
        TreeNote(7, ":used in", parent_id=3, target_note_id=4, notebook_id=1),
        TreeNote(8, ":gone link", parent_id=3, target_note_id=4, notebook_id=1, deleted_at=DELETED),
        TreeNote(9, "head_two 100%", notebook_id=2),
        TreeNote(10, "headXtwo", parent_id=9, notebook_id=2),
    ]


def _loaded(engine: Engine) -> list[TreeNote]:
    notes = _tree()
    admin_2025.create_tables(engine)
    admin_2025.insert_notes(engine, notes)
    return notes


def _largest(notes: list[TreeNote], attr: str) -> int:
    counts = Counter(getattr(n, attr) for n in notes if getattr(n, attr) is not None
                     and n.deleted_at is None)
    return max(counts.values())


def test_tree_stats_match_the_records(engine: Engine) -> None:
    notes = _loaded(engine)
    stats = admin_2025.tree_stats(engine)
    assert stats == admin_2025.TreeStats(
        rows=len(notes), links=sum(n.target_note_id is not None for n in notes),
        deleted=sum(n.deleted_at is not None for n in notes),
        notebooks=len({n.notebook_id for n in notes}),
        max_children=_largest(notes, "parent_id"), max_inbound=_largest(notes, "target_note_id"))
    assert admin_2025.count_notes(engine) == len(notes)


def test_titles_are_read_set_and_restored(engine: Engine) -> None:
    notes = {n.id: n.title for n in _loaded(engine)}
    assert admin_2025.titles_of(engine, [2, 5, 999]) == {2: notes[2], 5: notes[5]}
    admin_2025.set_titles(engine, {2: "edited two", 5: "edited five"})
    assert admin_2025.titles_of(engine, [2, 3, 5]) == {2: "edited two", 3: notes[3], 5: "edited five"}
    admin_2025.set_titles(engine, {2: notes[2], 5: notes[5]})
    assert admin_2025.titles_of(engine, notes) == notes


def test_count_titled_takes_the_prefix_literally(engine: Engine) -> None:
    _loaded(engine)
    assert admin_2025.count_titled(engine, "head") == 3
    assert admin_2025.count_titled(engine, "head_") == 1  # "_" is no wildcard: not "headXtwo"
    assert admin_2025.count_titled(engine, "head_two 100%") == 1
    assert admin_2025.count_titled(engine, "%") == 0


def test_live_plain_ids_drop_links_deleted_and_unknown_ids(engine: Engine) -> None:
    notes = _loaded(engine)
    asked = [n.id for n in notes] + [999]
    expected = {n.id for n in notes if n.target_note_id is None and n.deleted_at is None}
    assert admin_2025.live_plain_ids(engine, asked) == expected
    assert admin_2025.live_plain_ids(engine, []) == set()


def test_statement_counter_sees_only_its_block(engine: Engine) -> None:
    _loaded(engine)
    source = Doughnut2025(engine)
    source.check()
    with counted_statements(engine) as tally:
        source.live_ids_after(0, 100)
        source.live_ids_after(0, 100)
        source.count_live()
    assert tally.statements == 3
    assert sum(k.statements for k in tally.by_kind.values()) == 3
    assert tally.seconds >= sum(k.seconds for k in tally.by_kind.values()) * 0.999
    source.count_live()  # after the block: not counted
    assert tally.statements == 3


def test_statement_kind_names_the_verb_join_and_filter() -> None:
    assert statement_kind("SELECT note.id FROM note\n WHERE note.parent_id IN (1)") == (
        "SELECT WHERE note.parent_id")
    assert statement_kind("SELECT n.id FROM note AS n LEFT OUTER JOIN note AS p ON p.id = n.parent_id "
                          "WHERE n.id IN (1, 2)") == "SELECT rows WHERE n.id"
    assert statement_kind("WITH RECURSIVE chain AS (SELECT 1) SELECT 1") == "WITH RECURSIVE (ancestors)"
    assert statement_kind("SELECT 1") == "SELECT WHERE -"


@given(st.sampled_from(["db", "graphrag_bench_1m", None]),
       st.sampled_from(["mysql+pymysql://root@127.0.0.1:3306", "mysql+pymysql://u:p%40ss@h:1/old"]))
def test_with_database_replaces_only_the_database(name: str | None, url: str) -> None:
    moved = with_database(url, name)
    assert database_name(moved) == name
    assert with_database(moved, database_name(url)) == url  # password and the rest kept


@pytest.mark.parametrize("name", ["", "x`; DROP DATABASE mysql; --", "a b", "x" * 65])
def test_create_database_refuses_names_it_would_have_to_quote(name: str) -> None:
    with pytest.raises(ConfigurationError):
        create_database("mysql+pymysql://root@127.0.0.1:1", name)


@pytest.mark.mariadb
@pytest.mark.parametrize("backend", ["mariadb"], indirect=True)
def test_server_figures_on_mariadb(engine: Engine) -> None:
    _loaded(engine)
    assert buffer_pool_bytes(engine) >= 2**20
    assert "mariadb" in server_version(engine).lower() or server_version(engine)[0].isdigit()
    assert admin_2025.note_table_bytes(engine) > 0


# (row counts come from the driver's rowcount: PyMySQL's; SQLite's is -1 for a SELECT)
@pytest.mark.parametrize("backend", [pytest.param("mariadb", marks=pytest.mark.mariadb)])
def test_the_counter_tells_note_rows_from_id_rows(engine: Engine) -> None:
    notes = _loaded(engine)
    source = Doughnut2025(engine)
    source.check()
    with counted_statements(engine) as ids_only:
        source.live_ids_after(0, 100)
    assert ids_only.rows == sum(n.deleted_at is None for n in notes)
    assert ids_only.note_rows == 0
    with counted_statements(engine) as tally:
        ContextService(source, CharsCounter(), StrategyParams()).compute(
            Request(1, 0, 5000, 0), "wavefront")
    assert 0 < tally.note_rows < tally.rows  # the children lists are ids
    assert tally.note_rows == sum(k.note_rows for k in tally.by_kind.values())


def test_both_profiles_label_a_note_rows_text_as_the_counter_expects() -> None:
    assert NOTE_TEXT_LABELS & set(wiki_statements.NOTES.selected_columns.keys())
    assert NOTE_TEXT_LABELS & set(TreeStatements(note_table()).rows.selected_columns.keys())
