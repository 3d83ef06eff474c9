"""Demo and test writes for the ``doughnut-2026`` layout: create the tables, insert rows.

Never run against Doughnut's production database: the service itself only reads. Rows arrive per
table name as plain dicts of that table's columns; they go in foreign-key order, in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.engine import Engine

from storage.database import translated
from storage.profiles.tables_2026 import create_tables, metadata, nonempty_tables

__all__ = ["bazaar_notebooks", "count_rows", "create_tables", "delete_tokens", "insert_rows",
           "nonempty_tables", "other_readers", "save_content"]


def insert_rows(engine: Engine, rows: Mapping[str, Sequence[Mapping[str, Any]]], *,
                chunk: int = 500, bulk: bool = False) -> dict[str, int]:
    """Insert ``rows`` (table name -> rows) in foreign-key order; the count per table. ``bulk`` skips
    MySQL's unique and foreign-key checks for the session (generated data that keeps them)."""
    counts: dict[str, int] = {}
    with translated("cannot insert rows"), engine.begin() as conn:
        fast = bulk and conn.dialect.name in ("mysql", "mariadb")
        if fast:
            conn.exec_driver_sql("SET unique_checks=0, foreign_key_checks=0")
        for table in metadata.sorted_tables:
            batch = list(rows.get(table.name, ()))
            for start in range(0, len(batch), chunk):
                conn.execute(table.insert(), batch[start : start + chunk])
            counts[table.name] = len(batch)
        if fast:
            conn.exec_driver_sql("SET unique_checks=1, foreign_key_checks=1")
    return counts


def count_rows(engine: Engine) -> dict[str, int]:
    """Rows per table of the layout (deleted notes included)."""
    with translated("cannot count rows"), engine.connect() as conn:
        return {t.name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                for t in metadata.sorted_tables}


def save_content(engine: Engine, note_id: int, content: str,
                 links: Sequence[tuple[int, str]]) -> tuple[int, ...]:
    """What Doughnut does when a note's content is saved: the content, and the note's own link rows
    replaced by ``links`` ((target id, link text) in token order); the targets before the save.
    A demo's or a test's "edit in Doughnut" (the link texts must resolve to those targets)."""
    cache, note = _tables("note_wiki_title_cache"), _tables("note")
    with translated("cannot save a note"), engine.begin() as conn:
        before = tuple(conn.execute(select(cache.c.target_note_id).where(cache.c.note_id == note_id)
                                    .order_by(cache.c.id)).scalars())
        conn.execute(note.update().where(note.c.id == note_id).values(content=content))
        conn.execute(cache.delete().where(cache.c.note_id == note_id))
        for target, text in links:
            conn.execute(cache.insert().values(note_id=note_id, target_note_id=target, link_text=text))
    return before


def other_readers(engine: Engine, notebooks: Sequence[int]) -> dict[str, tuple[int, int]]:
    """Readers other than an owner, for the benchmark: ``subscriber`` and ``circle member`` ->
    (user id, notebook id), a subscription to one of ``notebooks`` and a member of the circle that
    owns one of them (absent kinds are left out)."""
    sub, member = _tables("subscription"), _tables("circle_user")
    own, book = _tables("ownership"), _tables("notebook")
    found: dict[str, tuple[int, int]] = {}
    with translated("cannot read readers"), engine.connect() as conn:
        row = conn.execute(select(sub.c.user_id, sub.c.notebook_id)
                           .where(sub.c.notebook_id.in_(list(notebooks)))
                           .order_by(sub.c.notebook_id, sub.c.user_id).limit(1)).first()
        if row is not None:
            found["subscriber"] = (int(row[0]), int(row[1]))
        row = conn.execute(select(member.c.user_id, book.c.id)
                           .join(own, own.c.circle_id == member.c.circle_id)
                           .join(book, book.c.ownership_id == own.c.id)
                           .where(book.c.id.in_(list(notebooks)))
                           .order_by(book.c.id, member.c.user_id).limit(1)).first()
        if row is not None:
            found["circle member"] = (int(row[0]), int(row[1]))
    return found


def bazaar_notebooks(engine: Engine, notebooks: Sequence[int]) -> set[int]:
    """Which of ``notebooks`` are in the bazaar."""
    bazaar = _tables("bazaar_notebook")
    with translated("cannot read the bazaar"), engine.connect() as conn:
        rows = conn.execute(select(bazaar.c.notebook_id)
                            .where(bazaar.c.notebook_id.in_(list(notebooks))))
        return {int(r[0]) for r in rows}


def delete_tokens(engine: Engine, tokens: Sequence[str]) -> None:
    """Delete the ``user_token`` rows of ``tokens``."""
    table = _tables("user_token")
    with translated("cannot delete tokens"), engine.begin() as conn:
        conn.execute(delete(table).where(table.c.token.in_(list(tokens))))


def _tables(name: str) -> Any:
    return metadata.tables[name]
