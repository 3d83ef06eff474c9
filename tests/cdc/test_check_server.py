"""Start-up checks against real servers: each gap is one line naming it, and nothing starts."""

from __future__ import annotations

import os
import pwd
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pymysql  # type: ignore[import-untyped,unused-ignore]
import pytest
from sqlalchemy.engine import make_url

from storage.binlog import (
    BinlogPosition,
    BinlogUnavailable,
    CdcSetupError,
    check_server,
    current_position,
    stream,
)
from tests.binlog_server import create_cdc_user, create_database, execute, private_mariadb

pytestmark = pytest.mark.mariadb

WATCHED = {"note"}
PASSWORD = "s3cret-Pa55"


def _database(url: str) -> str:
    return str(make_url(url).database)


def _fresh_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _problems(url: str, watched: set[str] = WATCHED) -> tuple[str, ...]:
    with pytest.raises(CdcSetupError) as raised:
        check_server(url, watched_tables=watched)
    message = str(raised.value)
    assert "\n" not in message and PASSWORD not in message
    return raised.value.problems


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"binlog_format": "STATEMENT"}, "binlog_format is STATEMENT, need ROW"),
        ({"binlog_format": "MIXED"}, "binlog_format is MIXED, need ROW"),
        ({"row_image": "MINIMAL"}, "binlog_row_image is MINIMAL, need FULL"),
        ({"row_metadata": "NO_LOG"}, "binlog_row_metadata is NO_LOG, need FULL"),
        ({"log_bin": False}, "binary log is off (log_bin=OFF)"),
    ],
    ids=["statement", "mixed", "minimal-image", "no-row-metadata", "log-bin-off"],
)
def test_each_bad_log_setting_is_one_line_naming_it(
    tmp_path: Path, settings: dict[str, Any], named: str
) -> None:
    with private_mariadb(tmp_path, **settings) as root:
        url = create_database(root, "doughnut")
        problems = _problems(url)
        assert len(problems) == 1 and problems[0].startswith(named), problems
        if settings == {"log_bin": False}:
            with pytest.raises(CdcSetupError, match="log_bin"):
                next(stream(url, server_id=7, watched_tables=WATCHED, follow=False))
            assert _connections(root) == 1  # only the one asking: nothing was left half-started


def _connections(root: str) -> int:
    conn = pymysql.connect(host="127.0.0.1", port=make_url(root).port, user="root")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.processlist WHERE user = 'root'")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def test_a_user_with_exactly_the_needed_grants_passes(cdc_db: str, binlog_server: str) -> None:
    database = _database(cdc_db)
    url = create_cdc_user(binlog_server, _fresh_name("cdc"), database=database, password=PASSWORD)
    info = check_server(url, watched_tables=WATCHED)
    assert (info.flavor, info.database, info.gtid_enabled) == ("mariadb", database, True)


@pytest.mark.parametrize(
    ("grants", "select", "missing"),
    [
        (("REPLICATION CLIENT",), True, "REPLICATION SLAVE"),
        (("REPLICATION SLAVE",), True, "REPLICATION CLIENT"),
        (("REPLICATION SLAVE", "REPLICATION CLIENT"), False, "SELECT on {db}.note"),
    ],
    ids=["no-replication-slave", "no-replication-client", "no-select"],
)
def test_each_missing_privilege_is_named(
    cdc_db: str, binlog_server: str, grants: tuple[str, ...], select: bool, missing: str
) -> None:
    database = _database(cdc_db)
    user = _fresh_name("cdc")
    url = create_cdc_user(binlog_server, user, database=database, global_privileges=grants,
                          select=select, password=PASSWORD)
    assert _problems(url) == (f"{user}@% lacks {missing.format(db=database)}",)


def test_privileges_through_a_role_a_database_grant_or_all_privileges_pass(
    cdc_db: str, binlog_server: str
) -> None:
    database = _database(cdc_db)
    role, by_role, by_db, by_all = (_fresh_name(p) for p in ("role", "r", "d", "a"))
    execute(
        binlog_server,
        f"CREATE ROLE {role}",
        f"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {role}",
        f"GRANT SELECT ON `{database}`.`note` TO {role}",
    )
    urls = [
        create_cdc_user(binlog_server, by_role, database=database, global_privileges=(), select=False),
        create_cdc_user(binlog_server, by_db, database=database, select=False),
        create_cdc_user(binlog_server, by_all, database=database, global_privileges=("ALL PRIVILEGES",),
                        select=False),
    ]
    execute(
        binlog_server,
        f"GRANT {role} TO '{by_role}'@'%'",
        f"SET DEFAULT ROLE {role} FOR '{by_role}'@'%'",
        f"GRANT SELECT ON `cdc\\_%`.* TO '{by_db}'@'%'",  # a LIKE pattern matching cdc_...
    )
    for url in urls:
        assert check_server(url, watched_tables=WATCHED).database == database


def test_a_missing_table_is_named_and_all_gaps_share_one_line(cdc_db: str, binlog_server: str) -> None:
    database = _database(cdc_db)
    watched = {"note", "folder"}
    assert _problems(cdc_db, watched) == (f"table {database}.folder does not exist",)
    user = _fresh_name("cdc")
    url = create_cdc_user(binlog_server, user, database=database,
                          global_privileges=("REPLICATION CLIENT",))
    # without a grant on it, the server does not tell the user whether `folder` exists
    assert _problems(url, watched) == (f"{user}@% lacks REPLICATION SLAVE, SELECT on {database}.folder",)


def test_the_stream_refuses_a_user_without_replication_slave(cdc_db: str, binlog_server: str) -> None:
    database = _database(cdc_db)
    url = create_cdc_user(binlog_server, _fresh_name("cdc"), database=database,
                          global_privileges=("REPLICATION CLIENT",), password=PASSWORD)
    start = current_position(cdc_db)
    execute(cdc_db, "INSERT INTO note (title) VALUES ('x')")
    with pytest.raises(CdcSetupError, match="REPLICATION SLAVE") as raised:
        list(stream(url, server_id=8, watched_tables=WATCHED, start=start, follow=False))
    assert PASSWORD not in str(raised.value)


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        url = f"mysql+pymysql://cdc:{PASSWORD}@127.0.0.1:{port}/doughnut"
        problems = _problems(url)
        assert len(problems) == 1 and problems[0].startswith("cannot connect to mysql+pymysql://cdc:***@")
        with pytest.raises(BinlogUnavailable, match="cannot connect"):
            next(stream(url, server_id=9, watched_tables=WATCHED, start=BinlogPosition(gtid="")))


def test_a_server_that_cannot_start_fails_the_test_with_its_reason(tmp_path: Path) -> None:
    expected = pytest.raises(pytest.fail.Exception, match=r"mariadbd exited .*binlog.format")
    with expected as failed, private_mariadb(tmp_path, binlog_format="NO-SUCH-FORMAT"):
        pass  # pragma: no cover - never reached
    assert "skip" not in str(failed.value).lower()


def test_a_private_server_leaves_the_shared_servers_temporary_tables_alone(tmp_path: Path) -> None:
    """MariaDB clears ``#sql*`` files from its temporary directory on start: never from ``/tmp``."""
    stray = Path(tempfile.gettempdir()) / f"#sql-temptable-graphrag-{uuid.uuid4().hex[:8]}.MAI"
    stray.touch()
    try:
        if os.geteuid() == 0:  # the shared server runs as mysql and owns its temporary tables
            entry = pwd.getpwnam("mysql")
            os.chown(stray, entry.pw_uid, entry.pw_gid)
        with private_mariadb(tmp_path):
            pass
        assert stray.exists()
    finally:
        stray.unlink(missing_ok=True)
