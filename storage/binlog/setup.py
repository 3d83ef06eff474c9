"""Start-up checks and current positions for change capture, in SQLAlchemy Core (no replication).

Before anything follows the log, :func:`check_server` asks the server for everything the reader
relies on and raises ONE line naming every gap: binary logging on (``log_bin``), ``binlog_format=ROW``,
``binlog_row_image=FULL``, ``binlog_row_metadata=FULL`` (without it the log carries neither column
names nor signedness, and the reader would have to guess both), and the account's ``REPLICATION
SLAVE``, ``REPLICATION CLIENT`` (MariaDB: ``BINLOG MONITOR``) and ``SELECT`` on each watched table.
Privileges come from ``SHOW GRANTS``; where the parse finds a gap that a probe statement can confirm
(``SHOW MASTER STATUS``, ``SELECT ... LIMIT 0``) the probe decides, so grant forms the parser does not
know (MySQL roles, partial revokes) cannot produce a false alarm for those two.

Connections go to no database (an account with only table grants may not ``USE`` it), time out after
a few seconds, and messages show the URL without its password. The errors and
:class:`BinlogPosition` live here so that the reader module can build on them without a cycle; the
public surface is re-exported by ``storage.binlog``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import create_engine, make_url, text
from sqlalchemy.engine import URL, Connection
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from graphrag.core.errors import DatabaseUnavailable, GraphRagError, InvalidParameter
from storage.binlog.grants import Grants

__all__ = [
    "BinlogPosition",
    "BinlogUnavailable",
    "CdcError",
    "CdcSetupError",
    "LogState",
    "PositionPurged",
    "ServerInfo",
    "check_server",
    "current_position",
    "first_line",
    "log_state",
    "parse_url",
]

_CONNECT_TIMEOUT_S = 5
_MARIADB_GTIDS = r"\d+-\d+-\d+(,\d+-\d+-\d+)*"
_MYSQL_GTIDS = r"[0-9a-fA-F-]{36}(:\d+(-\d+)?)+(,[0-9a-fA-F-]{36}(:\d+(-\d+)?)+)*"
_GTID_TEXT = re.compile(f"^({_MARIADB_GTIDS}|{_MYSQL_GTIDS})?$")

class CdcError(GraphRagError):
    """Root of the change-capture errors; every message is one line with no password."""


class CdcSetupError(CdcError):
    """The server or the account cannot feed change capture; ``problems`` name each missing piece."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


class PositionPurged(CdcError):
    """The server cannot send its log from the asked position (purged, unknown or not a boundary)."""


class BinlogUnavailable(CdcError, DatabaseUnavailable):
    """The server could not be reached or the replication connection was lost."""


@dataclass(frozen=True)
class BinlogPosition:
    """A transaction boundary: a GTID state (possibly empty: the log's start), or a file and offset."""

    gtid: str | None = None
    file: str | None = None
    offset: int | None = None

    def __post_init__(self) -> None:
        as_file = self.file is not None and self.offset is not None and self.offset >= 4
        if (self.gtid is None) == (not as_file) or (self.gtid is not None and self.file is not None):
            raise InvalidParameter("binlog position", "give a GTID set, or a file and offset >= 4")
        if self.gtid is not None and not _GTID_TEXT.match(self.gtid):
            raise InvalidParameter("binlog position", f"not a GTID set: {self.gtid[:80]!r}")

    @property
    def is_gtid(self) -> bool:
        return self.gtid is not None

    def to_text(self) -> str:
        """``gtid:<set>`` or ``file:<name>:<offset>``, for storage as a Redis string."""
        return f"gtid:{self.gtid}" if self.gtid is not None else f"file:{self.file}:{self.offset}"

    @classmethod
    def from_text(cls, value: str) -> BinlogPosition:
        kind, colon, rest = value.partition(":")
        if kind == "gtid" and colon:
            return cls(gtid=rest)
        name, _, offset = rest.rpartition(":")
        if kind != "file" or not name or not offset.isdigit():
            raise InvalidParameter("binlog position", f"unreadable stored position {value[:80]!r}")
        return cls(file=name, offset=int(offset))




@dataclass(frozen=True)
class ServerInfo:
    """What :func:`check_server` found: flavour, version, ids and whether GTIDs can be used."""

    flavor: Literal["mariadb", "mysql"]
    version: str
    server_id: int
    database: str
    user: str
    gtid_enabled: bool


def parse_url(url: str) -> URL:
    """The URL with the PyMySQL driver; anything but MySQL/MariaDB is a setup error."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as err:
        raise CdcSetupError(["the database URL is not a valid SQLAlchemy URL"]) from err
    if parsed.get_backend_name() not in ("mysql", "mariadb"):
        raise CdcSetupError([f"{parsed.get_backend_name()} has no binary log: need MySQL or MariaDB"])
    return parsed.set(drivername="mysql+pymysql")


def _shown(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def first_line(err: BaseException) -> str:
    """The driver's message, first line only (messages stay one line)."""
    orig = getattr(err, "orig", None) or err
    return (str(orig).splitlines() or [orig.__class__.__name__])[0]


def _connect_setup(url: str) -> tuple[URL, Connection]:
    """A connection (to no database: SELECT may be all the account has there) for setup queries."""
    parsed = parse_url(url)
    no_database = parsed._replace(database=None)  # URL.set(database=None) keeps the database
    timeout = {"connect_timeout": _CONNECT_TIMEOUT_S}
    engine = create_engine(no_database, poolclass=NullPool, connect_args=timeout)
    try:
        return parsed, engine.connect()
    except SQLAlchemyError as err:
        raise BinlogUnavailable(f"cannot connect to {_shown(parsed)}: {first_line(err)}") from err


def _variables(conn: Connection, names: Iterable[str]) -> dict[str, str]:
    wanted = {n.lower() for n in names}
    rows = conn.execute(text("SHOW GLOBAL VARIABLES")).all()
    return {str(k).lower(): str(v) for k, v in rows if str(k).lower() in wanted}


def _probe(conn: Connection, statement: str) -> int | None:
    """Run ``statement``; None when it works, else the server's error number."""
    try:
        conn.execute(text(statement)).all()
    except DBAPIError as err:
        args = getattr(err.orig, "args", ())
        return int(args[0]) if args and isinstance(args[0], int) else -1
    return None


def _log_problems(found: Mapping[str, str], version: str) -> list[str]:
    problems = []
    if found.get("log_bin", "OFF").upper() not in ("ON", "1"):
        problems.append("binary log is off (log_bin=OFF): start the server with --log-bin")
    for name in ("binlog_format", "binlog_row_image"):
        value = found.get(name, "unset").upper()
        want = "ROW" if name == "binlog_format" else "FULL"
        if value != want:
            problems.append(f"{name} is {value}, need {want}")
    metadata = found.get("binlog_row_metadata")
    if metadata is None:
        problems.append(f"binlog_row_metadata is missing in {version}: need MariaDB 10.5+/MySQL 8.0.14+")
    elif metadata.upper() != "FULL":
        problems.append(f"binlog_row_metadata is {metadata.upper()}, need FULL (logs column names)")
    return problems


def _privilege_problems(
    conn: Connection, database: str, tables: Iterable[str], mariadb: bool
) -> list[str]:
    """Missing privileges from SHOW GRANTS; a probe statement confirms a miss where one exists."""
    grants = Grants.parse(str(row[0]) for row in conn.execute(text("SHOW GRANTS")))
    missing = []
    if not grants.has_global("REPLICATION SLAVE", "REPLICATION REPLICA"):
        missing.append("REPLICATION SLAVE")
    client = ("REPLICATION CLIENT", "BINLOG MONITOR") + (() if mariadb else ("SUPER",))
    if not grants.has_global(*client) and _probe(conn, "SHOW MASTER STATUS") is not None:
        missing.append("REPLICATION CLIENT")
    problems = []
    for table in sorted(set(tables)):
        error = _probe(conn, f"SELECT * FROM `{database}`.`{table}` LIMIT 0")
        if error == 1146:
            problems.append(f"table {database}.{table} does not exist")
        elif error is not None and not grants.has_select(database, table):
            missing.append(f"SELECT on {database}.{table}")
    user = conn.execute(text("SELECT CURRENT_USER()")).scalar_one()
    return ([f"{user} lacks {', '.join(missing)}"] if missing else []) + problems


def check_server(url: str, *, watched_tables: Iterable[str]) -> ServerInfo:
    """Check the log settings and the account's privileges; raise one line naming every gap."""
    try:
        parsed, conn = _connect_setup(url)
    except BinlogUnavailable as err:
        raise CdcSetupError([str(err)]) from err
    if not parsed.database:
        conn.close()
        raise CdcSetupError([f"the URL {_shown(parsed)} names no database"])
    with conn:
        version, server_id, user = conn.execute(
            text("SELECT VERSION(), @@server_id, CURRENT_USER()")
        ).one()
        mariadb = "mariadb" in str(version).lower()
        found = _variables(conn, ("log_bin", "binlog_format", "binlog_row_image",
                                  "binlog_row_metadata", "gtid_mode"))
        problems = _log_problems(found, str(version))
        problems += _privilege_problems(conn, parsed.database, watched_tables, mariadb)
    if problems:
        raise CdcSetupError(problems)
    gtid = mariadb or found.get("gtid_mode", "OFF").upper() == "ON"
    return ServerInfo("mariadb" if mariadb else "mysql", str(version), int(server_id),
                      parsed.database, str(user), gtid)


def _file_position(conn: Connection) -> BinlogPosition:
    try:
        row = conn.execute(text("SHOW MASTER STATUS")).first()
    except DBAPIError as err:
        problem = f"SHOW MASTER STATUS failed (REPLICATION CLIENT?): {first_line(err)}"
        raise CdcSetupError([problem]) from err
    if row is None:
        raise CdcSetupError(["binary log is off (log_bin=OFF): start the server with --log-bin"])
    return BinlogPosition(file=str(row[0]), offset=int(row[1]))


@dataclass(frozen=True)
class LogState:
    """One look at the server: its flavour, GTID state (None: MySQL without GTIDs) and, when asked
    for, its file/offset (both read on one connection, one after the other)."""

    mariadb: bool
    gtid: BinlogPosition | None
    file: BinlogPosition | None


def log_state(url: str, *, with_file: bool) -> LogState:
    """The server's flavour and current positions; a server without a binary log is a setup error."""
    _parsed, conn = _connect_setup(url)
    with conn:
        version, log_bin = conn.execute(text("SELECT VERSION(), @@global.log_bin")).one()
        if str(log_bin) not in ("1", "ON"):
            raise CdcSetupError(["binary log is off (log_bin=OFF): start the server with --log-bin"])
        mariadb = "mariadb" in str(version).lower()
        gtid = None
        if mariadb:
            state = conn.execute(text("SELECT @@global.gtid_binlog_pos")).scalar()
            gtid = BinlogPosition(gtid=str(state or ""))
        elif _variables(conn, ["gtid_mode"]).get("gtid_mode", "OFF").upper() == "ON":
            executed = conn.execute(text("SELECT @@global.gtid_executed")).scalar()
            gtid = BinlogPosition(gtid=re.sub(r"\s+", "", str(executed)))
        return LogState(mariadb, gtid, _file_position(conn) if with_file else None)


def current_position(url: str, *, kind: Literal["auto", "gtid", "file"] = "auto") -> BinlogPosition:
    """The server's current boundary: its GTID state (MariaDB; MySQL with gtid_mode=ON) or its
    file/offset (``kind="file"``, or MySQL without GTIDs)."""
    state = log_state(url, with_file=kind == "file")
    if kind != "file" and state.gtid is not None:
        return state.gtid
    if kind == "gtid":
        raise CdcSetupError(["gtid_mode is OFF: GTID positions are unavailable"])
    if state.file is None:  # MySQL without GTIDs, asked for "auto"
        return current_position(url, kind="file")
    return state.file
