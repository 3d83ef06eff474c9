"""The pieces of a full rebuild read from a ``note`` table with a ``notebook_id`` column.

One statement lists the notebooks that have live notes after the cursor (a scan of the table's
``notebook_id`` index, once per dispatch call), then one statement per notebook reads its live ids
in id order, and the notes in no notebook are paged by id; they are packed into pieces as
storage.pieces says. Nothing holds a cursor open between pieces (a rebuild of a piece takes longer
than a server waits for a client that stopped reading).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, select

from service.ports import Cursor, Piece
from storage.database import translated
from storage.pieces import packed

__all__ = ["notebook_pieces"]


def notebook_pieces(engine: Engine, note: Any, max_notes: int,
                    after: Cursor = None) -> Iterator[Piece]:
    """Every live id of ``note`` after the cursor ``after`` once: per notebook (ascending), then
    those in no notebook."""
    return packed(_groups(engine, note, max_notes, after), max_notes)


def _groups(engine: Engine, note: Any, page: int,
            after: Cursor) -> Iterator[tuple[int | None, list[int]]]:
    if after is None or after[0] is not None:
        yield from _notebooks(engine, note, after)
    yield from _loose(engine, note, page, after[1] if after and after[0] is None else 0)


def _notebooks(engine: Engine, note: Any,
               after: Cursor) -> Iterator[tuple[int | None, list[int]]]:
    c = note.c
    live = c.deleted_at.is_(None)
    books = select(c.notebook_id).where(live, c.notebook_id.is_not(None)).distinct().order_by(
        c.notebook_id)
    if after is not None:
        books = books.where(c.notebook_id >= after[0])
    with translated(), engine.connect() as conn:
        notebooks = list(conn.execute(books).scalars())
    for notebook_id in notebooks:
        last = after[1] if after is not None and after[0] == notebook_id else 0
        ids = select(c.id).where(live, c.notebook_id == notebook_id, c.id > last).order_by(c.id)
        with translated(), engine.connect() as conn:
            yield notebook_id, list(conn.execute(ids).scalars())


def _loose(engine: Engine, note: Any, page: int,
           after: int) -> Iterator[tuple[int | None, list[int]]]:
    c = note.c
    while True:
        statement = (select(c.id).where(c.deleted_at.is_(None), c.notebook_id.is_(None),
                                        c.id > after).order_by(c.id).limit(max(page, 1)))
        with translated(), engine.connect() as conn:
            ids = list(conn.execute(statement).scalars())
        if not ids:
            return
        yield None, ids
        after = ids[-1]
