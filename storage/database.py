"""The SQL plumbing every schema profile shares: engines, sessions, error translation, chunking.

Driver errors never leave this package as driver types: :func:`translated` turns any SQLAlchemy
error into :class:`~graphrag.core.errors.DatabaseUnavailable` with one line naming the cause (never the
statement, its parameters or a password). IN lists are chunked to at most ``in_chunk`` ids (50-100:
MySQL switches from index dives to statistics at 200 values on a non-unique index).

Operators' helpers for benchmarks and demos live here too, with plain signatures (URLs, names,
integers): creating a database by name, counting the statements an engine runs, reading and setting
InnoDB's buffer pool, the server version and a table's size. None of them is on a request path.
"""

from __future__ import annotations

import datetime as dt
import re
import time
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import create_engine, event, make_url, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from graphrag.core.errors import ConfigurationError, DatabaseUnavailable

__all__ = [
    "GROUP_CONCAT_MAX_LEN",
    "NOTE_TEXT_LABELS",
    "Database",
    "KindTally",
    "StatementTally",
    "buffer_pool_bytes",
    "chunks",
    "close_engine",
    "counted_statements",
    "create_database",
    "database_name",
    "ensure_database",
    "epoch_ms",
    "open_engine",
    "prepare_engine",
    "reason",
    "selects_run",
    "server_version",
    "set_buffer_pool_bytes",
    "shown_url",
    "statement_kind",
    "table_bytes",
    "translated",
    "with_database",
]

#: Session cap on one GROUP_CONCAT list (bytes). A list cut short by it is detected and read again
#: row by row, so it bounds memory, not correctness.
GROUP_CONCAT_MAX_LEN = 16 * 1024 * 1024
_EPOCH = dt.datetime(1970, 1, 1)
#: An open database (a SQLAlchemy engine) as callers outside the adapters see it: an opaque handle
#: they get from :func:`open_engine` and hand to a profile, never use themselves.
Database = Engine


def reason(err: BaseException) -> str:
    """One line naming the cause, without the statement or parameters."""
    orig = getattr(err, "orig", None)
    return str(orig if orig is not None else err).splitlines()[0]


@contextmanager
def translated(what: str = "database error") -> Iterator[None]:
    """Run a block; any SQLAlchemy error leaves as DatabaseUnavailable("<what>: <cause>")."""
    try:
        yield
    except SQLAlchemyError as err:
        raise DatabaseUnavailable(f"{what}: {reason(err)}") from err


def shown_url(url: str) -> str:
    """The URL without its password, for messages (an unparsable one is not shown at all)."""
    try:
        return repr(make_url(url).render_as_string(hide_password=True))
    except (ArgumentError, ValueError):
        return "(unparsable)"


def _prepare_session(dbapi_connection: Any, _record: Any) -> None:
    with dbapi_connection.cursor() as cursor:
        cursor.execute("SET time_zone = '+00:00'")
        cursor.execute(f"SET SESSION group_concat_max_len = {GROUP_CONCAT_MAX_LEN}")


def _statement_timeout(timeout_ms: int) -> Any:
    """A connect hook that bounds every statement of the session to ``timeout_ms``: MariaDB's
    ``max_statement_time`` (seconds), else MySQL's ``max_execution_time`` (ms, SELECTs only, which
    is every statement this service sends)."""

    def limit(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT VERSION()")
            if "mariadb" in str(cursor.fetchone()[0]).lower():
                cursor.execute(f"SET SESSION max_statement_time = {timeout_ms / 1000:.3f}")
            else:
                cursor.execute(f"SET SESSION max_execution_time = {int(timeout_ms)}")

    return limit


def _crc32(text: str | None) -> int | None:
    """MySQL's ``CRC32(text)``: zlib's CRC-32 of the UTF-8 bytes (None stays None)."""
    return None if text is None else zlib.crc32(str(text).encode("utf-8"))


def _prepare_sqlite(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.create_function("crc32", 1, _crc32, deterministic=True)


def prepare_engine(engine: Engine, *, statement_timeout_ms: int = 0) -> Engine:
    """Make MySQL/MariaDB sessions read TIMESTAMPs in UTC, as Doughnut stores them, allow long
    GROUP_CONCAT lists (MySQL 8's default cap is 1,024 bytes) and bound each statement to
    ``statement_timeout_ms`` (0: the server's own bound); give SQLite MySQL's ``CRC32`` (Doughnut
    2026 samples by it)."""
    if engine.dialect.name in ("mysql", "mariadb"):
        event.listen(engine, "connect", _prepare_session)
        if statement_timeout_ms > 0:
            event.listen(engine, "connect", _statement_timeout(statement_timeout_ms))
    elif engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _prepare_sqlite)
    return engine


def open_engine(url: str, *, pool_size: int | None = None, statement_timeout_ms: int = 0) -> Engine:
    """An engine for a SQLAlchemy URL; a malformed URL is a configuration error (no password).
    ``pool_size``: connections kept open per process (SQLAlchemy's default when None; SQLite keeps
    its own pool); ``statement_timeout_ms``: see :func:`prepare_engine`."""
    pooled = {} if pool_size is None or url.startswith("sqlite") else {"pool_size": pool_size}
    try:
        engine = create_engine(url, pool_pre_ping=True, **pooled)
    except (ArgumentError, ValueError) as err:
        raise ConfigurationError(f"database URL {shown_url(url)} is not a valid SQLAlchemy URL") from err
    except ImportError as err:
        raise ConfigurationError(f"no driver installed for database URL {shown_url(url)}") from err
    except NoSuchModuleError as err:
        raise ConfigurationError(f"unknown database dialect in URL {shown_url(url)}") from err
    return prepare_engine(engine, statement_timeout_ms=statement_timeout_ms)


def epoch_ms(moment: dt.datetime) -> int:
    """Milliseconds since the epoch of a naive UTC (or aware) datetime."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def chunks(ids: Iterable[int], size: int) -> Iterator[list[int]]:
    """``ids`` sorted and cut into lists of at most ``size``."""
    ordered = sorted(ids)
    for start in range(0, len(ordered), size):
        yield ordered[start : start + size]


# -- operators' helpers (benchmarks, demos) ----------------------------------------------------------
_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")


def close_engine(engine: Database) -> None:
    """Close every pooled connection of ``engine`` (before dropping its database, or at exit)."""
    engine.dispose()


def with_database(url: str, name: str | None) -> str:
    """``url`` pointing at database ``name`` (None: the server, no database), password kept.
    (``URL.set`` ignores a None, so the named tuple's ``_replace`` it is.)"""
    return make_url(url)._replace(database=name).render_as_string(hide_password=False)


def database_name(url: str) -> str | None:
    """The database a URL names, if any."""
    return make_url(url).database


def create_database(server_url: str, name: str, *, keep: bool = False) -> None:
    """Create database ``name`` empty (utf8mb4, as Doughnut's), dropping one of that name first
    unless ``keep`` (then an existing one is left as it is). ``name`` is letters, digits and
    underscores only: it is spliced into the statement, not bound."""
    if not _NAME.match(name):
        raise ConfigurationError(f"database name {name!r}: letters, digits and underscores only")
    engine = open_engine(with_database(server_url, None))
    try:
        with translated(f"cannot create database {name}"), engine.begin() as conn:
            if not keep:
                conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
            conn.execute(text(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4 "
                              "COLLATE utf8mb4_unicode_ci"))
    finally:
        engine.dispose()


def ensure_database(url: str) -> None:
    """Create the database ``url`` names if its server has none of that name, keeping one that
    exists (a SQLite file is made on first use)."""
    name = database_name(url)
    if name is not None and not url.startswith("sqlite"):
        create_database(url, name, keep=True)


def _scalar(engine: Database, statement: str, **params: Any) -> Any:
    with translated(), engine.connect() as conn:
        return conn.execute(text(statement), params).scalar()


def server_version(engine: Database) -> str:
    """``SELECT VERSION()`` of a MySQL/MariaDB server."""
    return str(_scalar(engine, "SELECT VERSION()"))


def buffer_pool_bytes(engine: Database) -> int:
    """InnoDB's buffer pool size (``@@innodb_buffer_pool_size``)."""
    return int(_scalar(engine, "SELECT @@innodb_buffer_pool_size"))


def selects_run(engine: Database) -> int:
    """How many SELECT statements the server has run since it started, by every client
    (``Com_select`` of its global status)."""
    with translated(), engine.connect() as conn:
        row = conn.execute(text("SHOW GLOBAL STATUS LIKE 'Com_select'")).one()
    return int(row[1])


def set_buffer_pool_bytes(engine: Database, size_bytes: int) -> None:
    """``SET GLOBAL innodb_buffer_pool_size`` (needs the privilege; the server resizes in the
    background and rounds to its chunk size)."""
    with translated("cannot set innodb_buffer_pool_size"), engine.connect() as conn:
        conn.execute(text(f"SET GLOBAL innodb_buffer_pool_size = {int(size_bytes)}"))


def table_bytes(engine: Database, table: str) -> int:
    """Data + index bytes of ``table`` in the engine's database, as information_schema estimates
    them (0 when there is no such table)."""
    statement = ("SELECT data_length + index_length FROM information_schema.tables "
                 "WHERE table_schema = DATABASE() AND table_name = :name")
    return int(_scalar(engine, statement, name=table) or 0)


def statement_kind(statement: str) -> str:
    """A short name of a statement: its verb, ``rows`` when it joins, and the first column of its
    WHERE (``SELECT WHERE note.parent_id``, ``SELECT rows WHERE n.id``, ...); recursive CTEs are
    ``WITH RECURSIVE (ancestors)``."""
    flat = " ".join(statement.split())
    if flat.startswith("WITH RECURSIVE"):
        return "WITH RECURSIVE (ancestors)"
    where = re.search(r" WHERE (\S+)", flat)
    joined = "rows " if " JOIN " in flat else ""
    return f"{flat.split(' ', 1)[0]} {joined}WHERE {where.group(1) if where else '-'}"


#: The labels the profiles give a note's text in a result (storage.profiles.tables_2025's note
#: rows: ``details``; storage.profiles.wiki_statements: ``n_content``): a row of a result with one
#: of them is a *note row*, a note's fields decoded; any other row is ids or a folder's, notebook's
#: or access row.
NOTE_TEXT_LABELS = frozenset({"details", "n_content"})


@dataclass
class KindTally:
    """Statements of one kind, the seconds spent in ``execute`` for them, the rows they returned
    (each decoded by the driver) and how many of those were note rows (:data:`NOTE_TEXT_LABELS`)."""

    statements: int = 0
    seconds: float = 0.0
    rows: int = 0
    note_rows: int = 0


@dataclass
class StatementTally:
    """What :func:`counted_statements` saw: totals and a :class:`KindTally` per statement kind."""

    statements: int = 0
    seconds: float = 0.0
    rows: int = 0
    note_rows: int = 0
    by_kind: dict[str, KindTally] = field(default_factory=dict)

    def add(self, statement: str, seconds: float, rows: int = 0, *, note_rows: bool = False) -> None:
        """One statement that returned ``rows`` rows, note rows when ``note_rows``."""
        kind = self.by_kind.setdefault(statement_kind(statement), KindTally())
        notes = rows if note_rows else 0
        kind.statements, kind.seconds = kind.statements + 1, kind.seconds + seconds
        kind.rows, kind.note_rows = kind.rows + rows, kind.note_rows + notes
        self.statements, self.seconds, self.rows = self.statements + 1, self.seconds + seconds, (
            self.rows + rows)
        self.note_rows += notes


@contextmanager
def counted_statements(engine: Database) -> Iterator[StatementTally]:
    """Count and time every statement ``engine`` executes inside the block (cursor-execute events;
    the timer assumes one statement at a time, as a rebuild drives one connection)."""
    tally, started = StatementTally(), [0.0]

    def before(*_: Any) -> None:
        started[0] = time.perf_counter()

    def after(_conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        rows = cursor.rowcount if statement.lstrip().upper().startswith(("SELECT", "WITH")) else 0
        columns = {column[0] for column in cursor.description or ()}
        tally.add(statement, time.perf_counter() - started[0], max(rows, 0),
                  note_rows=not columns.isdisjoint(NOTE_TEXT_LABELS))

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)
    try:
        yield tally
    finally:
        event.remove(engine, "before_cursor_execute", before)
        event.remove(engine, "after_cursor_execute", after)
