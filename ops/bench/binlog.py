"""A private MariaDB with a row-based binary log, for the change-capture section.

The machine's MariaDB may run without a binary log (and must not be reconfigured by a benchmark), so
the section installs a data directory into a fresh temporary directory (``mariadb-install-db``),
starts ``mariadbd`` on a free loopback port with ``log_bin``, ``binlog_format=ROW``,
``binlog_row_image=FULL`` and ``binlog_row_metadata=FULL``, and on exit stops it (SIGTERM, then
SIGKILL) and removes the directory. Run as root, the server drops to the ``mysql`` user, which
therefore owns the directory. Both the bootstrap and the server get a ``--tmpdir`` inside that
directory: MariaDB deletes every ``#sql*`` file in its temporary directory when it starts, which in
``/tmp`` would include the temporary tables the machine's own MariaDB is using.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ops.bench.helpers import database_holds, free_port, say, wait_for
from ops.bench.plan import BenchError
from storage.database import Database, server_version

__all__ = ["private_binlog_server"]

_OPTIONS = ("--no-defaults", "--innodb-buffer-pool-size=256M")


def _user() -> tuple[str, ...]:
    return ("--user=mysql",) if os.geteuid() == 0 else ()


def _chown(path: Path) -> None:
    if os.geteuid() != 0:
        return
    entry = pwd.getpwnam("mysql")
    for root, dirs, files in os.walk(path):
        for name in (root, *(os.path.join(root, n) for n in (*dirs, *files))):
            os.chown(name, entry.pw_uid, entry.pw_gid)


def _answers(engine: Database) -> bool:
    server_version(engine)
    return True


def _run(command: list[str]) -> None:
    try:
        subprocess.run(command, check=True, capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as err:
        raise BenchError(f"{Path(command[0]).name} failed: {err}") from err


@contextlib.contextmanager
def private_binlog_server() -> Iterator[str]:
    """The root URL (no database) of a fresh MariaDB with a ROW/FULL/FULL binary log."""
    base = Path(tempfile.mkdtemp(prefix="graphrag-bench-binlog-"))
    data, port = base / "data", free_port()
    tmpdir = f"--tmpdir={base / 'tmp'}"
    proc: subprocess.Popen[bytes] | None = None
    try:
        (base / "tmp").mkdir()
        _chown(base)
        _run([shutil.which("mariadb-install-db") or "mariadb-install-db", *_OPTIONS, f"--datadir={data}",
              tmpdir, "--auth-root-authentication-method=normal", "--skip-test-db", *_user()])
        proc = subprocess.Popen(
            [shutil.which("mariadbd") or "/usr/sbin/mariadbd", *_OPTIONS, f"--datadir={data}", tmpdir,
             f"--port={port}", f"--socket={data / 'sock'}", "--bind-address=127.0.0.1",
             "--log-bin=bin", "--binlog-format=ROW", "--binlog-row-image=FULL",
             "--binlog-row-metadata=FULL", "--server-id=1", *_user()],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"mysql+pymysql://root@127.0.0.1:{port}"
        if not wait_for(lambda: proc.poll() is None and database_holds(url, _answers), 30, 0.2):
            raise BenchError(f"the private MariaDB on port {port} did not start")
        say(f"private MariaDB with a binary log on port {port}")
        yield url
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(base, ignore_errors=True)
