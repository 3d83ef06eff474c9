"""A database's identity as its content names it (service.binding): the same statement for both
layouts, since both keep Doughnut's ``note`` table with its ``id`` and ``created_at``.

The name is the database the engine's URL names (a SQLite file: its absolute path), not the
server's: a replica is the same database under another host. Creation times are read in UTC (the
engine's sessions set ``time_zone`` to +00:00), so a replica in another time zone names the same
instants. The oldest notes are read with the deleted ones: Doughnut deletes softly.
"""

from __future__ import annotations

import datetime as dt
import os

from sqlalchemy import column, select, table
from sqlalchemy.engine import Engine

from service.binding import OLDEST_NOTES, DatabaseIdentity
from storage.database import translated

__all__ = ["identity_of"]


_NOTE = table("note", column("id"), column("created_at"))


def identity_of(engine: Engine, layout: str) -> DatabaseIdentity:
    """The identity of the database ``engine`` reads, of table layout ``layout``."""
    statement = select(_NOTE.c.id, _NOTE.c.created_at).order_by(_NOTE.c.id).limit(OLDEST_NOTES)
    with translated("database unreachable"), engine.connect() as conn:
        rows = conn.execute(statement).all()
    return DatabaseIdentity.of(layout, _name(engine), [(int(r[0]), _instant(r[1])) for r in rows])


def _name(engine: Engine) -> str:
    database = engine.url.database or ""
    if engine.dialect.name == "sqlite" and database not in ("", ":memory:"):
        return os.path.abspath(database)
    return database


def _instant(value: object) -> str:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat(sep=" ", timespec="seconds")
    return str(value)[:19]
