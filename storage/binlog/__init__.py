"""Reading MySQL/MariaDB's row-based binary log (change capture, docs/architecture.md).

The only package that imports ``pymysqlreplication``: :mod:`storage.binlog.stream` follows the log
and emits committed transactions of the watched tables, :mod:`storage.binlog.setup` checks the
server's settings and the user's privileges and reads positions, :mod:`storage.binlog.grants`
parses SHOW GRANTS and logged statements (pure text).
"""

from storage.binlog.stream import (
    BinlogPosition,
    BinlogUnavailable,
    CdcError,
    CdcSetupError,
    PositionPurged,
    RowChange,
    SchemaChanged,
    ServerInfo,
    Transaction,
    check_server,
    current_position,
    stream,
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
