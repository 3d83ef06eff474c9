"""Fixtures for the change-capture tests: one private MariaDB with a ROW binary log per session.

Every test gets a fresh database on that server and reads the log from the position the server had
when the database was made, so tests never see each other's transactions in their watched tables.
The server is stopped and its directory removed when the session ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.binlog_server import create_database, private_mariadb

__all__ = ["OTHER_TABLE_DDL"]

#: An unwatched table beside ``note``, so tests can show that its changes are left out.
OTHER_TABLE_DDL = (
    "CREATE TABLE other (id INT PRIMARY KEY, label VARCHAR(20)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
)


@pytest.fixture(scope="session")
def binlog_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Root URL (no database) of the session's private MariaDB with ROW/FULL/FULL logging."""
    with private_mariadb(tmp_path_factory.mktemp("binlog-server")) as url:
        yield url


@pytest.fixture
def cdc_db(binlog_server: str) -> str:
    """Root URL of a fresh database holding ``note`` and ``other``."""
    return create_database(binlog_server, f"cdc_{uuid.uuid4().hex[:10]}", extra_tables=[OTHER_TABLE_DDL])


@pytest.fixture
def server_dir(tmp_path: Path) -> Path:
    """Where a test's extra server leaves its error log."""
    return tmp_path
