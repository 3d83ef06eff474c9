"""Which tables a database user may read: each one tried with a statement that reads no row.

The doctor (worker.cli.doctor) asks this of the reader's account; a table it may not read (no
SELECT grant) or that does not exist is named, so the fix is one GRANT per name. A database that
cannot be reached at all raises DatabaseUnavailable instead: that is not a missing grant.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from storage.database import translated

__all__ = ["unreadable_tables"]


def unreadable_tables(engine: Engine, tables: Iterable[str]) -> list[str]:
    """The tables of ``tables`` that ``engine``'s user cannot SELECT from, in the order given."""
    with translated("database unreachable"), engine.connect() as conn:
        return [table for table in tables if not _readable(conn, engine, table)]


def _readable(conn: Connection, engine: Engine, table: str) -> bool:
    quoted = engine.dialect.identifier_preparer.quote(table)
    try:
        conn.execute(text(f"SELECT 1 FROM {quoted} WHERE 1 = 0")).close()
    except DBAPIError as err:
        if err.connection_invalidated:
            raise
        conn.rollback()
        return False
    return True
