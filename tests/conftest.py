"""Database fixtures: every storage test runs against SQLite and against the real MariaDB.

``engine`` is parametrized over two backends:

* ``sqlite``: a fresh SQLite file under ``tmp_path`` (a file, not ``sqlite://``, so that several
  pooled connections see the same data without a StaticPool);
* ``mariadb``: a fresh, uniquely named database on the server at ``GRAPHRAG_TEST_MYSQL_URL``
  (default ``mysql+pymysql://root@127.0.0.1:3306``), dropped afterwards.

MariaDB is a hard requirement: when it cannot be reached the test fails (as a setup error) with a
message naming the URL; it is never skipped.

The fixtures at the end are shared by the test modules of one subject that is split over several
files: the parsed ``docker-compose.yml`` (deployment) and the ``graphrag mcp`` service (MCP).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError

from storage.database import open_engine
from storage.profiles import admin_2025
from storage.profiles.doughnut_2025 import Doughnut2025
from tests.deployment_support import COMPOSE_FILE

if TYPE_CHECKING:
    from tests.mcp_support import Service

#: The throw-away services (a local Redis Cluster, private RabbitMQ vhosts) for every directory.
pytest_plugins = ("tests.services.plugin", "tests.reliability.figures")

MYSQL_URL_ENV = "GRAPHRAG_TEST_MYSQL_URL"
DEFAULT_MYSQL_URL = "mysql+pymysql://root@127.0.0.1:3306"
BACKENDS = ("sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb))


def mysql_base_url() -> URL:
    """The server URL (no database) from ``GRAPHRAG_TEST_MYSQL_URL`` or the local default."""
    raw = os.environ.get(MYSQL_URL_ENV, "").strip() or DEFAULT_MYSQL_URL
    return make_url(raw).set(database=None)


def url_string(url: URL) -> str:
    """The URL as a string with its password (``str(url)`` would mask it as ``***``)."""
    return url.render_as_string(hide_password=False)


@contextmanager
def mariadb_database() -> Iterator[URL]:
    """Create a fresh, uniquely named database; yield its URL; drop it afterwards."""
    base = mysql_base_url()
    name = f"graphrag_test_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url_string(base), connect_args={"connect_timeout": 5})
    try:
        problem = None
        try:
            with admin.begin() as conn:
                conn.execute(
                    text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
                )
        except SQLAlchemyError as err:
            problem = (
                f"MariaDB is required for the storage tests but is not usable at "
                f"{base.render_as_string(hide_password=True)} ({err.__class__.__name__}: "
                f"{str(getattr(err, 'orig', err)).splitlines()[0]}). Start MariaDB or point "
                f"{MYSQL_URL_ENV} at a server where the user may CREATE DATABASE."
            )
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        try:
            yield base.set(database=name)
        finally:
            with admin.begin() as conn:
                conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
    finally:
        admin.dispose()


@contextmanager
def backend_engine(backend: str, directory: Path) -> Iterator[Engine]:
    """An engine from :func:`storage.database.open_engine` on a fresh, empty database."""
    if backend == "sqlite":
        engine = open_engine(f"sqlite:///{directory / 't.db'}")
        try:
            yield engine
        finally:
            engine.dispose()
    elif backend == "mariadb":
        with mariadb_database() as url:
            engine = open_engine(url_string(url))
            try:
                yield engine
            finally:
                engine.dispose()  # before DROP DATABASE: pooled connections would hold locks
    else:  # pragma: no cover - a typo in a parametrization
        raise ValueError(f"unknown backend {backend!r}")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend name of the current parametrization: ``sqlite`` or ``mariadb``."""
    return str(request.param)


@pytest.fixture
def engine(backend: str, tmp_path: Path) -> Iterator[Engine]:
    """A fresh, empty database on the current backend (no ``note`` table yet)."""
    with backend_engine(backend, tmp_path) as eng:
        yield eng


def new_store(engine: Engine) -> Doughnut2025:
    """The ``doughnut-2025`` source on ``engine``, its ``note`` table created (empty) and checked
    (as a process does at start: the one-time column inspection is not a per-batch statement)."""
    admin_2025.create_tables(engine)
    source = Doughnut2025(engine)
    source.check()
    return source


@pytest.fixture
def store(engine: Engine) -> Doughnut2025:
    """The ``doughnut-2025`` source on ``engine`` with Doughnut's ``note`` table created (empty)."""
    return new_store(engine)


@pytest.fixture
def mariadb_url() -> Iterator[URL]:
    """The URL of a fresh, empty MariaDB database (for MariaDB-only behaviour such as TIMESTAMP)."""
    with mariadb_database() as url:
        yield url


# -- docker-compose.yml, for tests/test_deployment_compose.py and tests/test_deployment_runbook.py ---
@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


# -- graphrag mcp, for tests/test_mcp.py and tests/test_mcp_http.py -----------------------------------
# tests.mcp_support is imported inside the fixtures: the MCP client library takes a second to import,
# and most test runs never need it.
@pytest.fixture(scope="module")
def sample_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.mcp_support import ROOT

    url = f"sqlite:///{tmp_path_factory.mktemp('mcp') / 'sample.db'}"
    for command in (["db", "init", "--schema", "doughnut-2025"],
                    ["db", "load-sample", "--schema", "doughnut-2025"]):
        done = subprocess.run([sys.executable, "-c", "from worker.cli.main import main; main()",
                               *command, "--db", url], capture_output=True, timeout=120, cwd=ROOT)
        assert done.returncode == 0, done.stderr
    return url


@pytest.fixture
def no_inherited_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process reader reads only what the subprocess is given."""
    for name in list(os.environ):
        if name.startswith("GRAPHRAG_") and not name.startswith("GRAPHRAG_TEST_"):
            monkeypatch.delenv(name)


@pytest.fixture
def svc(sample_url: str) -> Iterator[Service]:
    from tests.mcp_support import service_on

    with service_on(sample_url) as service:
        yield service
