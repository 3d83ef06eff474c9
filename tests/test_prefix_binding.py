"""One cache per database (service.binding), with real processes, MariaDB servers and Redis.

* Two databases, one key prefix: the first process binds the prefix; a second one on the other
  database (``graphrag rebuild``, ``graphrag serve``, ``graphrag worker``) refuses to start with one
  line naming both identities.
* ``graphrag prefix take-over``: afterwards no snapshot of the first database is ever served, not
  even one that a process of the first deployment, still running, writes after the take-over.
* A replica (the same rows under the same name, on another server) is the same database; a database
  of the same name on another server with other rows is not.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from storage.redis.client import build_client, delete_prefix
from tests.binlog_server import execute, private_mariadb
from tests.conftest import mariadb_database, url_string
from tests.reliability.support import graphrag
from worker.compose import Wiring
from worker.http.server import build_http_app
from worker.settings import Settings

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

REDIS_URL = "redis://127.0.0.1:6379/0"
TOKEN = "binding-test-token"


@pytest.fixture
def prefix() -> Iterator[str]:
    name = f"graphrag-binding:{uuid.uuid4().hex[:12]}:v1"
    yield name
    delete_prefix(build_client(REDIS_URL, timeout_ms=2_000), name)


def env(database_url: str, prefix: str, **extra: str) -> dict[str, str]:
    from tests.reliability.support import cli_env

    return cli_env(GRAPHRAG_DATABASE_URL=database_url, GRAPHRAG_REDIS_URL=REDIS_URL,
                   GRAPHRAG_REDIS_PREFIX=prefix, GRAPHRAG_SCHEMA="doughnut-2026",
                   GRAPHRAG_READER_TOKEN=TOKEN, **extra)


def loaded(url: str, marker: str) -> str:
    """``url`` with today's sample notebooks loaded, every note's content marked with ``marker``."""
    for step in (("db", "init", "--schema", "doughnut-2026"),
                 ("db", "load-sample", "--schema", "doughnut-2026")):
        done = graphrag(*step, "--db", url)
        assert done.returncode == 0, done.stderr.decode()
    root, name = url.rsplit("/", 1)
    execute(root, f"UPDATE note SET content = CONCAT('{marker} ', COALESCE(content, ''))",
            database=name)
    return url


@pytest.fixture
def first() -> Iterator[str]:
    with mariadb_database() as url:
        yield loaded(url_string(url), "FirstDatabaseMarker")


@pytest.fixture
def second() -> Iterator[str]:
    with mariadb_database() as url:
        yield loaded(url_string(url), "SecondDatabaseMarker")


def one_line(proc: subprocess.CompletedProcess[bytes], *digests: str) -> str:
    lines = [line for line in proc.stderr.decode().splitlines() if "holds the snapshots of" in line]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr.decode()[-2000:]
    assert "Traceback" not in proc.stderr.decode()
    for digest in digests:
        assert digest in lines[0]
    return lines[0]


def digest_of(url: str) -> str:
    return Wiring(Settings(database_url=url, schema_name="doughnut-2026")).source.identity().digest


def test_a_second_database_is_refused_until_it_takes_the_prefix_over(
    first: str, second: str, prefix: str, tmp_path: Path,
) -> None:
    done = graphrag("rebuild", "--all", env=env(first, prefix))
    assert done.returncode == 0, done.stderr.decode()
    mine, theirs = digest_of(first), digest_of(second)
    assert mine != theirs

    one_line(graphrag("rebuild", "--all", env=env(second, prefix)), mine, theirs)
    one_line(graphrag("serve", "--port", "1", env=env(second, prefix)), mine, theirs)
    worker = graphrag("worker", "--concurrency", "1", env=env(
        second, prefix, CELERY_BROKER_URL=f"{REDIS_URL[:-1]}15"), timeout_s=60)
    one_line(worker, mine, theirs)

    # a process of the first deployment that keeps running through the take-over
    still_running = Wiring(Settings(database_url=first, schema_name="doughnut-2026",
                                    redis_prefix=prefix, redis_url=REDIS_URL))
    still_running.check_binding()
    ids = sorted(still_running.source.live_ids_after(0, 10_000))

    taken = graphrag("prefix", "take-over", "--yes", "--here", env=env(second, prefix))
    assert taken.returncode == 0, taken.stderr.decode()
    report = still_running.rebuild(ids)  # the first database's snapshots, under the prefix again
    assert report.count > 0, report.summary()

    app = build_http_app(Settings(database_url=second, schema_name="doughnut-2026",
                                  redis_prefix=prefix, redis_url=REDIS_URL, reader_token=TOKEN))
    sources = []
    with TestClient(app) as client:
        for note_id in ids:
            response = client.get(f"/notes/{note_id}/graph",
                                  headers={"Authorization": f"Bearer {TOKEN}"})
            assert response.status_code in (200, 403, 404), response.text
            assert b"FirstDatabaseMarker" not in response.content, (note_id, response.headers)
            sources.append(response.headers.get("X-Graphrag-Source"))
            if response.status_code == 200:
                assert b"SecondDatabaseMarker" in response.content, (note_id, response.headers)
    assert "live" in sources, "the first database's snapshots were there, and computed over"


def test_a_replica_is_the_same_database_and_a_namesake_elsewhere_is_not(
    first: str, prefix: str, tmp_path: Path,
) -> None:
    done = graphrag("rebuild", "--all", env=env(first, prefix))
    assert done.returncode == 0, done.stderr.decode()
    name = first.rsplit("/", 1)[1]
    dump = subprocess.run(["mysqldump", "--no-defaults", "-h127.0.0.1", "-uroot", name],
                          capture_output=True, check=True).stdout
    with private_mariadb(tmp_path / "elsewhere") as root:
        execute(root, f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        port = root.rsplit(":", 1)[1]
        restore = subprocess.run(["mysql", "--no-defaults", "-h127.0.0.1", f"-P{port}", "-uroot",
                                  name], input=dump, capture_output=True)
        assert restore.returncode == 0, restore.stderr.decode()
        replica = f"{root}/{name}"
        assert digest_of(replica) == digest_of(first)
        accepted = graphrag("rebuild", "--all", env=env(replica, prefix))
        assert accepted.returncode == 0, accepted.stderr.decode()

        execute(root, "UPDATE note SET created_at = created_at - INTERVAL 1 DAY "
                      "ORDER BY id LIMIT 1", database=name)
        one_line(graphrag("rebuild", "--all", env=env(replica, prefix)), digest_of(first),
                 digest_of(replica))
