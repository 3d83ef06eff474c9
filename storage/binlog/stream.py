"""Following MySQL/MariaDB's row-based binary log: the one place that speaks replication.

The reader turns the log into two kinds of items, each emitted only at a transaction boundary:

* :class:`Transaction` at every commit (XID, ``COMMIT`` or XA ``PREPARE``) with every row change of
  that transaction on a watched table, in log order, as FULL before/after images keyed by column name.
  A transaction touching no watched table is emitted too, with no changes, so that progress can be
  stored; a rolled-back InnoDB transaction never reaches the log and so is never emitted.
* :class:`SchemaChanged` when rows of a watched table changed in a way row images do not describe: a
  DDL statement (``ALTER``/``DROP``/``RENAME``/``CREATE``/``TRUNCATE``) naming it, a statement-logged
  DML statement naming it (a session that switched to STATEMENT logging), or a row event written
  without FULL images or column names. The consumer's answer is a full rebuild.

Invariant: every ``position_after`` is the boundary right after the item's group of events, so a
reader started there neither repeats nor skips a committed transaction. With GTIDs (MariaDB
``domain-server-seq`` per domain, MySQL ``uuid:intervals``) the position is the GTID state including
the group; with file/offset it is the end offset of the group's last event in the file the server
was sending. Events of a group that was cut off (stop, lost connection) are never emitted.

Only this module imports ``pymysqlreplication``; its and PyMySQL's errors leave as the classes of
``storage.binlog.setup`` (start-up checks and positions, re-exported here with the rest of the surface).
Three behaviours of the library (and server) are worked around here:

* its reader silently reconnects after a lost connection, from its ORIGINAL start position (a replay
  with GTIDs, a mid-transaction start with file/offset): our connections turn a lost connection into
  :class:`BinlogUnavailable`, and the caller resumes from the last position it stored;
* the non-blocking dump ends, on MariaDB 10.11, with a TCP reset that loses whatever the client had not
  read yet once the backlog exceeds the socket buffers: the reader always blocks, with the server's
  idle heartbeat, and a catch-up read (``follow=False``) stops by itself at the log's end;
* it names columns only when the log carries them (``binlog_row_metadata=FULL``, checked at start-up;
  without it it would also misread unsigned integers): a row event without names or with a partial
  image is reported as :class:`SchemaChanged`, never guessed.

Call :func:`check_server` before :func:`stream`: the stream itself assumes a ROW/FULL/FULL log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import pymysql  # type: ignore[import-untyped,unused-ignore]
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.bitmap import BitCount
from pymysqlreplication.event import (
    GtidEvent,
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.gtid import Gtid, GtidSet
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
from sqlalchemy.engine import URL

from graphrag.core.errors import InvalidParameter
from storage.binlog.grants import changed_tables
from storage.binlog.setup import (
    BinlogPosition,
    BinlogUnavailable,
    CdcError,
    CdcSetupError,
    PositionPurged,
    ServerInfo,
    check_server,
    current_position,
    first_line,
    log_state,
    parse_url,
)

__all__ = [
    "BinlogPosition",
    "BinlogUnavailable",
    "CdcError",
    "CdcSetupError",
    "PositionPurged",
    "RowChange",
    "SchemaChanged",
    "ServerInfo",
    "Transaction",
    "check_server",
    "current_position",
    "stream",
]

ChangeKind = Literal["insert", "update", "delete"]
_CONNECT_TIMEOUT_S = 5
_LOST = (2006, 2013)  # server gone away, lost connection


@dataclass(frozen=True)
class RowChange:
    """One row of a watched table; ``before``/``after`` are FULL images (None for insert/delete).

    Values are what PyMySQL would read: ``TIMESTAMP`` as a naive ``datetime`` in UTC (as the service's
    SQL sessions read it), unsigned integers as non-negative ``int``, text as ``str``, NULL as ``None``.
    """

    table: str
    kind: ChangeKind
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True)
class Transaction:
    """A committed transaction: its changes on watched tables (maybe none) and the boundary after it."""

    position_after: BinlogPosition
    changes: tuple[RowChange, ...] = ()


@dataclass(frozen=True)
class SchemaChanged:
    """Rows of watched ``tables`` changed without row images (DDL, TRUNCATE, ...): rebuild everything."""

    tables: tuple[str, ...]
    statement_kind: str
    position_after: BinlogPosition

    @property
    def table(self) -> str:
        return self.tables[0]


# -- the stream ----------------------------------------------------------------------------------


class _StreamLost(Exception):
    """A lost replication connection, hidden from the library so that it cannot reconnect."""


class _NoSilentReconnect(pymysql.connections.Connection):  # type: ignore[misc]
    """PyMySQL connection whose lost-connection errors the library does not catch and retry."""

    def _read_packet(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super()._read_packet(*args, **kwargs)
        except pymysql.err.OperationalError as err:
            if err.args and err.args[0] in _LOST:
                raise _StreamLost(first_line(err)) from err
            raise


def _settings(parsed: URL, heartbeat_s: float) -> dict[str, Any]:
    return {
        "host": parsed.host or "127.0.0.1",
        "port": parsed.port or 3306,
        "user": parsed.username or "",
        "password": parsed.password or "",
        "charset": "utf8mb4",
        "connect_timeout": _CONNECT_TIMEOUT_S,
        "read_timeout": max(10, int(heartbeat_s * 4)),
    }



def _reader(url: str, server_id: int, start: BinlogPosition, watched: set[str], heartbeat_s: float,
            mariadb: bool) -> BinLogStreamReader:
    """A blocking reader with idle heartbeats. Never the non-blocking dump: MariaDB ends it with a
    TCP reset that loses what the client had not yet read when the backlog exceeds socket buffers."""
    parsed = parse_url(url)
    where: dict[str, Any] = (
        {"auto_position": start.gtid, "is_mariadb": mariadb}
        if start.is_gtid
        else {"log_file": start.file, "log_pos": start.offset, "resume_stream": True}
    )
    return BinLogStreamReader(
        connection_settings=_settings(parsed, heartbeat_s),
        server_id=server_id,
        blocking=True,
        slave_heartbeat=heartbeat_s,
        only_schemas=[parsed.database],
        only_tables=sorted(watched),
        only_events=[GtidEvent, MariadbGtidEvent, QueryEvent, XidEvent, XAPrepareEvent, RotateEvent,
                     HeartbeatLogEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        pymysql_wrapper=_NoSilentReconnect,
        enable_logging=False,
        **where,
    )


def _complete(event: Any) -> bool:
    """True when the row event carries every column, each with its name."""
    count = int(event.number_of_columns)
    bitmaps = [event.columns_present_bitmap, getattr(event, "columns_present_bitmap2", None)]
    full = all(BitCount(b) == count for b in bitmaps if b is not None)
    return full and all(column.name for column in event.columns)


def _row_changes(event: Any) -> list[RowChange]:
    table = str(event.table)
    if isinstance(event, WriteRowsEvent):
        return [RowChange(table, "insert", None, dict(r["values"])) for r in event.rows]
    if isinstance(event, DeleteRowsEvent):
        return [RowChange(table, "delete", dict(r["values"]), None) for r in event.rows]
    return [RowChange(table, "update", dict(r["before_values"]), dict(r["after_values"]))
            for r in event.rows]


@dataclass
class _Assembler:
    """Groups events into transactions and tracks the boundary after the last complete group."""

    database: str
    watched: frozenset[str]
    position: BinlogPosition
    mariadb: bool
    file: str | None = None
    gtid: str | None = None  # of the open group
    open: bool = False  # inside BEGIN ... COMMIT (MariaDB: after a non-standalone GTID event)
    changes: list[RowChange] = field(default_factory=list)
    unreadable: tuple[tuple[str, ...], str] | None = None

    def feed(self, event: Any) -> Transaction | SchemaChanged | None:
        if isinstance(event, RotateEvent):
            self.file = str(event.next_binlog)
        elif isinstance(event, MariadbGtidEvent | GtidEvent):
            self.gtid, self.changes, self.unreadable = str(event.gtid), [], None
            self.open = isinstance(event, MariadbGtidEvent) and not event.flags & 1  # FL_STANDALONE
        elif isinstance(event, WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent):
            self._rows(event)
        elif isinstance(event, XidEvent | XAPrepareEvent):
            return self._close(event)
        elif isinstance(event, QueryEvent):
            return self._query(event)
        return None

    def _rows(self, event: Any) -> None:
        if event.schema != self.database or event.table not in self.watched:
            return
        if _complete(event):
            self.changes.extend(_row_changes(event))
        else:
            self.unreadable = ((str(event.table),), "PARTIAL_IMAGE")

    def _query(self, event: QueryEvent) -> Transaction | SchemaChanged | None:
        statement = str(event.query).strip().upper()
        if statement == "BEGIN" or statement.startswith("XA START"):
            self.open = True
            return None
        if statement in ("COMMIT", "ROLLBACK"):
            return self._close(event)
        schema = bytes(event.schema).decode("utf-8", "replace")
        touched = changed_tables(str(event.query), schema, self.database, self.watched)
        if touched is not None:
            self.unreadable = touched
        return None if self.open else self._close(event)

    def _close(self, event: Any) -> Transaction | SchemaChanged:
        self.position = self._after(event)
        self.open, changes, unreadable = False, tuple(self.changes), self.unreadable
        self.gtid, self.changes, self.unreadable = None, [], None
        if unreadable is not None:
            return SchemaChanged(unreadable[0], unreadable[1], self.position)
        return Transaction(self.position, changes)

    def _after(self, event: Any) -> BinlogPosition:
        if not self.position.is_gtid:
            return BinlogPosition(file=self.file or self.position.file, offset=int(event.packet.log_pos))
        if self.gtid is None:  # a group without GTID in a GTID stream: the state is unchanged
            return self.position
        if self.mariadb:
            state = {g.split("-")[0]: g for g in (self.position.gtid or "").split(",") if g}
            state[self.gtid.split("-")[0]] = self.gtid
            return BinlogPosition(gtid=",".join(state[d] for d in sorted(state, key=int)))
        return BinlogPosition(gtid=str(GtidSet(self.position.gtid or None) + Gtid(self.gtid)))


def _translate(err: Exception, server_id: int) -> CdcError:
    if isinstance(err, _StreamLost):
        return BinlogUnavailable(f"replication connection lost: {err}")
    code = err.args[0] if err.args and isinstance(err.args[0], int) else None
    line = first_line(err)
    if code == 1236 and "server_id" in line.replace("server-id", "server_id").lower():
        return CdcSetupError([f"another replica or reader uses server_id {server_id}: {line}"])
    if code == 1236:
        return PositionPurged(f"the server cannot send its log from the stored position: {line}")
    if code in (1045, 1227, 1044):
        return CdcSetupError([f"the replication connection was refused: {line}"])
    return BinlogUnavailable(f"reading the binary log failed: {line}")


def _reached(position: BinlogPosition, end: BinlogPosition) -> bool:
    """Whether ``position`` is at or past ``end`` (both of the same kind, from one server)."""
    if not end.is_gtid:
        return (position.file or "", position.offset or 0) >= (end.file or "", end.offset or 0)
    if ":" in (end.gtid or "") or ":" in (position.gtid or ""):
        return GtidSet(end.gtid or None) in GtidSet(position.gtid or None)

    def seqs(gtid: str | None) -> dict[str, int]:
        return {g.split("-")[0]: int(g.split("-")[2]) for g in (gtid or "").split(",") if g}

    ours = seqs(position.gtid)
    return all(ours.get(domain, -1) >= seq for domain, seq in seqs(end.gtid).items())


def _caught_up(
    event: Any, item: Any, end: BinlogPosition | None, log_end: BinlogPosition | None
) -> bool:
    """Whether a non-following stream is done: an item reached ``end``, or the server sent an idle
    heartbeat at or past the log's end as it was at the call (after a rotation with nothing after
    it, no item can reach ``end`` in the new file)."""
    if end is None or log_end is None:
        return False
    if item is not None and _reached(item.position_after, end):
        return True
    if not isinstance(event, HeartbeatLogEvent):
        return False
    here = BinlogPosition(file=str(event.ident), offset=max(4, int(event.packet.log_pos)))
    return _reached(here, log_end)


def stream(
    url: str,
    *,
    server_id: int,
    watched_tables: set[str],
    start: BinlogPosition | None = None,
    stop: threading.Event | None = None,
    follow: bool = True,
    heartbeat_s: float = 1.0,
    opened: Callable[[], object] = lambda: None,
) -> Iterator[Transaction | SchemaChanged]:
    """Committed transactions and schema changes of the URL's database, from ``start`` onwards.

    ``start=None`` begins at the server's current position. With ``follow`` the stream blocks for new
    transactions and returns within ``heartbeat_s`` (the server's idle heartbeat) of ``stop`` being
    set. Without ``follow`` it returns once it has caught up with the position the server had when
    called (or the server reports it idle). Closing the iterator ends it at once. ``opened`` is
    called at most once per call, when the server starts sending the log (its first event, the
    rotation every dump starts with), before the first item; not at all when the stream fails or
    ends before that.
    """
    if not 1 <= server_id < 2**32:
        raise InvalidParameter("server_id", "must be between 1 and 2**32 - 1")
    database = parse_url(url).database
    if not database:
        raise CdcSetupError(["the URL names no database"])
    state = log_state(url, with_file=not follow)
    start = start if start is not None else state.gtid or current_position(url, kind="file")
    end = None if follow else (state.gtid if start.is_gtid else state.file)
    if end is not None and _reached(start, end):
        return
    assembler = _Assembler(database, frozenset(watched_tables), start, state.mariadb, file=start.file)
    reader = _reader(url, server_id, start, set(watched_tables), heartbeat_s, state.mariadb)
    unopened = True
    try:
        for event in reader:
            if unopened:
                opened()
                unopened = False
            item = assembler.feed(event)
            if item is not None:
                yield item
            if _caught_up(event, item, end, state.file) or (stop is not None and stop.is_set()):
                return
    except (_StreamLost, pymysql.err.MySQLError) as err:
        raise _translate(err, server_id) from err
    finally:
        reader.close()
