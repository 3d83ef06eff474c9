"""Demo and test writes for the ``doughnut-2025`` layout: create the table, insert notes.

Never run against Doughnut's production database: the service itself only reads. Rows arrive as
:class:`storage.records.TreeNote` records, so no caller outside this package names a column.

The benchmark's reads and edits of a generated database are here too, in plain terms: counts and
the shape of the tree (:class:`TreeStats`), titles of given notes and setting them (the "edit in
Doughnut" an invalidation measurement makes and restores), and which given ids are live non-link
notes. Every driver error leaves as ``DatabaseUnavailable`` (:func:`storage.database.translated`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import MetaData, bindparam, desc, func, select
from sqlalchemy.engine import Connection, Engine

from storage.database import chunks, table_bytes, translated
from storage.profiles.doughnut_2025 import Doughnut2025
from storage.profiles.tables_2025 import DETAILS_COLUMNS, TITLE_COLUMNS, note_table
from storage.records import TreeNote

__all__ = [
    "TreeStats",
    "count_notes",
    "count_titled",
    "create_tables",
    "drop_tables",
    "insert_notes",
    "live_plain_ids",
    "note_table_bytes",
    "replace_note",
    "set_titles",
    "titles_of",
    "tree_stats",
]

#: ids per IN list of the bulk reads below
_CHUNK = 1000


def create_tables(engine: Engine, *, title: str = TITLE_COLUMNS[0],
                  details: str = DETAILS_COLUMNS[0]) -> None:
    """Create Doughnut 2025's ``note`` table if none exists (column names as given)."""
    metadata = MetaData()
    note_table(title, details, metadata)
    with translated("cannot create the note table"):
        metadata.create_all(engine)


def drop_tables(engine: Engine) -> None:
    metadata = MetaData()
    note_table(metadata=metadata)
    with translated("cannot drop the note table"):
        metadata.drop_all(engine)


def _row(note: TreeNote) -> dict[str, Any]:
    return {
        "id": note.id, "parent_id": note.parent_id, "target_note_id": note.target_note_id,
        "sibling_order": note.sibling_order, "title": note.title, "details": note.details,
        "created_at": note.created_at, "updated_at": note.created_at,
        "deleted_at": note.deleted_at, "notebook_id": note.notebook_id, "creator_id": 1,
    }


def insert_notes(engine: Engine, notes: Iterable[TreeNote], *, chunk: int = 1000,
                 bulk: bool = False) -> int:
    """Insert ``notes`` in chunks into the existing table (whatever its title/details names);
    ``bulk`` skips MySQL's unique and foreign-key checks for the session (generated data)."""
    table = Doughnut2025(engine).table
    rows = [_row(n) for n in notes]
    with translated("cannot insert notes"), engine.begin() as conn:
        fast = bulk and conn.dialect.name in ("mysql", "mariadb")
        if fast:
            conn.exec_driver_sql("SET unique_checks=0, foreign_key_checks=0")
        for start in range(0, len(rows), chunk):
            conn.execute(table.insert(), rows[start : start + chunk])
        if fast:
            conn.exec_driver_sql("SET unique_checks=1, foreign_key_checks=1")
    return len(rows)


def replace_note(engine: Engine, note: TreeNote) -> None:
    """Overwrite the row of ``note.id`` with ``note`` (a demo's or a test's "edit in Doughnut")."""
    table = Doughnut2025(engine).table
    row = {k: v for k, v in _row(note).items() if k != "id"}
    with translated("cannot update a note"), engine.begin() as conn:
        conn.execute(table.update().where(table.c.id == note.id).values(**row))


# -- a generated database, as the benchmark reads and edits it ----------------------------------------
@dataclass(frozen=True)
class TreeStats:
    """The shape of a note tree: rows (deleted included), link notes, soft-deleted notes, distinct
    notebooks, and the largest live children list and live inbound list of any one note."""

    rows: int
    links: int
    deleted: int
    notebooks: int
    max_children: int
    max_inbound: int


def _largest_group(conn: Connection, column: Any, deleted_at: Any) -> int:
    statement = (select(func.count().label("n")).where(column.is_not(None), deleted_at.is_(None))
                 .group_by(column).order_by(desc("n")).limit(1))
    return int(conn.execute(statement).scalar() or 0)


def tree_stats(engine: Engine) -> TreeStats:
    """Counts over the whole table (a full scan and two grouped index scans)."""
    c = Doughnut2025(engine).table.c
    totals = select(func.count(), func.count(c.target_note_id), func.count(c.deleted_at),
                    func.count(func.distinct(c.notebook_id)))
    with translated("cannot count notes"), engine.connect() as conn:
        rows, links, deleted, notebooks = conn.execute(totals).one()
        children = _largest_group(conn, c.parent_id, c.deleted_at)
        inbound = _largest_group(conn, c.target_note_id, c.deleted_at)
    return TreeStats(int(rows), int(links), int(deleted), int(notebooks), children, inbound)


def count_notes(engine: Engine) -> int:
    """Rows of the table, soft-deleted ones included."""
    table = Doughnut2025(engine).table
    with translated("cannot count notes"), engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def count_titled(engine: Engine, prefix: str) -> int:
    """Notes whose title starts with ``prefix`` (literally: ``%`` and ``_`` are not wildcards)."""
    table = Doughnut2025(engine).table
    statement = (select(func.count()).select_from(table)
                 .where(table.c.title.startswith(prefix, autoescape=True)))
    with translated("cannot count notes"), engine.connect() as conn:
        return int(conn.execute(statement).scalar_one())


def titles_of(engine: Engine, ids: Iterable[int]) -> dict[int, str]:
    """id -> title of those of ``ids`` that exist (deleted or not)."""
    table = Doughnut2025(engine).table
    statement = select(table.c.id, table.c.title).where(table.c.id.in_(bindparam("ids", expanding=True)))
    with translated("cannot read titles"), engine.connect() as conn:
        return {int(r.id): r.title for chunk in chunks(ids, _CHUNK)
                for r in conn.execute(statement, {"ids": chunk})}


def set_titles(engine: Engine, titles: Mapping[int, str]) -> None:
    """Overwrite the titles of the given notes, in one transaction (nothing else changes)."""
    if not titles:
        return
    table = Doughnut2025(engine).table
    statement = table.update().where(table.c.id == bindparam("nid")).values(title=bindparam("text"))
    with translated("cannot update titles"), engine.begin() as conn:
        conn.execute(statement, [{"nid": i, "text": t} for i, t in titles.items()])


def live_plain_ids(engine: Engine, ids: Iterable[int]) -> set[int]:
    """Those of ``ids`` that are live notes and not link notes."""
    c = Doughnut2025(engine).table.c
    statement = select(c.id).where(c.id.in_(bindparam("ids", expanding=True)),
                                   c.target_note_id.is_(None), c.deleted_at.is_(None))
    with translated("cannot read notes"), engine.connect() as conn:
        return {int(i) for chunk in chunks(ids, _CHUNK)
                for i in conn.execute(statement, {"ids": chunk}).scalars()}


def note_table_bytes(engine: Engine) -> int:
    """Data + index bytes of the note table (MySQL/MariaDB's information_schema estimate)."""
    return table_bytes(engine, Doughnut2025(engine).table.name)
