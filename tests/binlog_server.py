"""A private MariaDB with a binary log, started by the tests themselves.

The machine's shared MariaDB runs without a binary log and must not be reconfigured, so the change
capture tests run their own ``mariadbd`` on a free loopback port with its own data directory:

* one data directory is installed per test process (``mariadb-install-db``, a few seconds) and then
  copied for every server, so an extra server with other settings costs well under a second;
* the server listens on ``127.0.0.1`` only, on a port the kernel handed out, with a small buffer pool;
* on exit it is stopped (SIGTERM, then SIGKILL after a grace period) and its directory removed, so
  nothing outlives the test that started it;
* a server that does not start is a test FAILURE naming the reason and the tail of its error log,
  never a skip: the tests it guards would otherwise pass without having run.

The data directory lives in a fresh directory under the system temporary directory rather than in
pytest's ``tmp_path``: pytest's base directory is private to the current user (mode 0700), and
``mariadbd`` drops to the ``mysql`` user when started as root. ``tmp_path`` keeps a copy of the error
log after the server is gone.

Every private server, and the bootstrap server ``mariadb-install-db`` runs, gets a ``--tmpdir`` of
its own. MariaDB deletes every ``#sql*`` file in its temporary directory when it starts, to clear
what a crash left behind; with the default ``/tmp`` that includes the on-disk temporary tables the
machine's shared MariaDB is using at that moment, and a query of another test fails ("Error on
delete of '/tmp/#sql-temptable-...'").
"""

from __future__ import annotations

import atexit
import functools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pymysql  # type: ignore[import-untyped,unused-ignore]
import pytest
from sqlalchemy.engine import make_url

from tests.ports import free_port

__all__ = [
    "NOTE_TABLE_DDL",
    "create_cdc_user",
    "create_database",
    "execute",
    "private_mariadb",
]

_START_TIMEOUT_S = 30.0
_STOP_GRACE_S = 10.0
_SERVER_USER = "mysql"
_COMMON_OPTIONS = (
    "--no-defaults",
    "--innodb-buffer-pool-size=16M",
    "--innodb-log-file-size=8M",
)

#: A table shaped like Doughnut's ``note`` for the columns whose types matter to the binary log:
#: unsigned ids, utf8mb4 text, nullable columns, ``TIMESTAMP`` with and without fractions.
NOTE_TABLE_DDL = """
CREATE TABLE note (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  parent_id INT UNSIGNED NULL,
  target_note_id INT UNSIGNED NULL,
  sibling_order BIGINT NOT NULL DEFAULT 1,
  title VARCHAR(150) NOT NULL,
  details TEXT NULL,
  created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  deleted_at TIMESTAMP(3) NULL DEFAULT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""


def _run_as_server_user() -> bool:
    """True when ``mariadbd`` must be told to drop to the ``mysql`` user (we are root)."""
    return os.geteuid() == 0


def _give_to_server_user(path: Path) -> None:
    """Hand ``path`` (recursively) to the ``mysql`` user when we are root; no-op otherwise."""
    if not _run_as_server_user():
        return
    entry = pwd.getpwnam(_SERVER_USER)
    for root, dirs, files in os.walk(path):
        for name in (root, *(os.path.join(root, n) for n in (*dirs, *files))):
            os.chown(name, entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def _user_options() -> tuple[str, ...]:
    return (f"--user={_SERVER_USER}",) if _run_as_server_user() else ()


@functools.cache
def _template_datadir() -> Path:
    """A freshly installed data directory, made once per process and copied for each server."""
    base = Path(tempfile.mkdtemp(prefix="graphrag-mariadb-template-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    datadir = base / "data"
    (base / "tmp").mkdir()
    _give_to_server_user(base)
    command = [
        shutil.which("mariadb-install-db") or "mariadb-install-db",
        *_COMMON_OPTIONS,
        f"--datadir={datadir}",
        f"--tmpdir={base / 'tmp'}",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
        *_user_options(),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        pytest.fail(f"mariadb-install-db could not run: {err}", pytrace=False)
    if done.returncode != 0:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        pytest.fail(f"mariadb-install-db failed ({done.returncode}): {tail}", pytrace=False)
    return datadir


def _server_command(datadir: Path, port: int, options: Iterable[str]) -> list[str]:
    return [
        shutil.which("mariadbd") or "/usr/sbin/mariadbd",
        *_COMMON_OPTIONS,
        f"--datadir={datadir}",
        f"--tmpdir={datadir.parent / 'tmp'}",
        f"--port={port}",
        f"--socket={datadir / 'sock'}",
        f"--pid-file={datadir / 'pid'}",
        f"--log-error={datadir / 'error.log'}",
        "--bind-address=127.0.0.1",
        "--skip-name-resolve",
        *options,
        *_user_options(),
    ]


def _log_tail(datadir: Path, lines: int = 6) -> str:
    """The last lines of the error log, or of the server's own output (option errors go there)."""
    for name in ("error.log", "../mariadbd.out"):
        with suppress(OSError):
            text = (datadir / name).read_text(errors="replace").strip()
            if text:
                return " | ".join(text.splitlines()[-lines:])
    return "(no error log)"


def _wait_until_answering(process: subprocess.Popen[bytes], datadir: Path, port: int) -> None:
    """Poll until the server accepts a root login; fail the test if it exits or never answers."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"mariadbd exited with {process.returncode} on port {port}: {_log_tail(datadir)}",
                pytrace=False,
            )
        with suppress(pymysql.err.OperationalError):
            pymysql.connect(host="127.0.0.1", port=port, user="root", connect_timeout=1,
                            ssl_disabled=True).close()
            return
        time.sleep(0.05)
    pytest.fail(f"mariadbd did not answer on port {port} in {_START_TIMEOUT_S:.0f} s", pytrace=False)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL when the server has not exited within the grace period."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=_STOP_GRACE_S)


def _binlog_options(log_bin: bool, binlog_format: str, row_image: str, row_metadata: str) -> list[str]:
    return [
        "--log-bin=bin" if log_bin else "--skip-log-bin",
        f"--binlog-format={binlog_format}",
        f"--binlog-row-image={row_image}",
        f"--binlog-row-metadata={row_metadata}",
    ]


@contextmanager
def private_mariadb(
    tmp_path: Path,
    *,
    binlog_format: str = "ROW",
    log_bin: bool = True,
    row_image: str = "FULL",
    row_metadata: str = "FULL",
    server_id: int = 1,
) -> Iterator[str]:
    """Start a private MariaDB (binary log as asked) and yield its root URL; stop and remove it after.

    ``row_metadata`` is MariaDB's ``binlog_row_metadata``: column names reach the log only with FULL.
    """
    base = Path(tempfile.mkdtemp(prefix="graphrag-mariadb-"))
    datadir = base / "data"
    process: subprocess.Popen[bytes] | None = None
    try:
        shutil.copytree(_template_datadir(), datadir, symlinks=True)
        (base / "tmp").mkdir()
        _give_to_server_user(base)
        port = free_port()
        options = [
            f"--server-id={server_id}",
            *_binlog_options(log_bin, binlog_format, row_image, row_metadata),
        ]
        command = _server_command(datadir, port, options)
        try:
            with open(base / "mariadbd.out", "wb") as output:
                process = subprocess.Popen(command, cwd=datadir, stdout=output, stderr=output)
        except OSError as err:
            pytest.fail(f"mariadbd could not be started: {err}", pytrace=False)
        _wait_until_answering(process, datadir, port)
        yield f"mysql+pymysql://root@127.0.0.1:{port}"
    finally:
        if process is not None:
            _stop(process)
        with suppress(OSError):
            shutil.copy(datadir / "error.log", tmp_path / f"mariadb-{base.name}.log")
        shutil.rmtree(base, ignore_errors=True)


def _connect(url: str, database: str | None = None) -> pymysql.connections.Connection:
    """A PyMySQL connection from a ``mysql+pymysql://user[:password]@host:port`` test URL."""
    parsed = make_url(url)
    return pymysql.connect(
        host=parsed.host or "127.0.0.1",
        port=parsed.port or 3306,
        user=parsed.username or "root",
        password=parsed.password or "",
        database=database or parsed.database,
        charset="utf8mb4",
        autocommit=True,
        # loopback test servers have no TLS; PyMySQL's "preferred" TLS would load the system's CA
        # bundle for every connection (tens of ms each, in loops of thousands of statements)
        ssl_disabled=True,
    )


def execute(url: str, *statements: str, database: str | None = None) -> None:
    """Run statements on one connection in autocommit mode (``BEGIN``/``COMMIT`` work as written)."""
    conn = _connect(url, database)
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


def create_database(url: str, name: str, *, extra_tables: Iterable[str] = ()) -> str:
    """Create database ``name`` with a ``note`` table (and ``extra_tables`` DDL); return its URL."""
    execute(url, f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    execute(url, NOTE_TABLE_DDL, *extra_tables, database=name)
    return f"{url}/{name}"


def create_cdc_user(
    url: str,
    user: str,
    *,
    database: str,
    tables: Iterable[str] = ("note",),
    global_privileges: Iterable[str] = ("REPLICATION SLAVE", "REPLICATION CLIENT"),
    select: bool = True,
    password: str = "cdc-secret",
) -> str:
    """A least-privilege change-capture user (global privileges + SELECT per table); its URL."""
    statements = [f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'"]
    granted = ", ".join(global_privileges)
    if granted:
        statements.append(f"GRANT {granted} ON *.* TO '{user}'@'%'")
    if select:
        statements += [f"GRANT SELECT ON `{database}`.`{t}` TO '{user}'@'%'" for t in tables]
    execute(url, *statements)
    host_port = url.split("@", 1)[1]
    return f"mysql+pymysql://{user}:{password}@{host_port}/{database}"
