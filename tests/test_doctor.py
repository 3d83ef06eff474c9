"""``graphrag doctor`` on a correct private deployment, and on setups built to break each check.

A private MariaDB with a row-based binary log holds today's Doughnut (the bundled sample) with a
reader account of SELECT grants only; a private ``redis-server`` is the cache (``volatile-lru``,
room for the site). On that the doctor passes every check and exits 0. Then one thing at a time is
broken, and the doctor exits 1 with that check's FAIL line and its one-line fix: a server without a
binary log, a missing grant, a ``maxmemory`` too small for the site, a key prefix bound to another
database, Doughnut's users left on the shared token, no change source on today's Doughnut, and
Doughnut's session endpoint (a stub) failing or not listening.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from service.binding import DatabaseIdentity
from storage.redis.binding import RedisBinding
from storage.redis.keys import Keys
from tests.binlog_server import execute, private_mariadb
from tests.ports import free_port
from tests.proxy_support import doughnut_stub
from tests.reliability.servers import RedisServer
from tests.reliability.support import cli_env, graphrag

pytestmark = pytest.mark.mariadb

READER = "doctor_reader"


@dataclass
class Deployment:
    root: str  # the server's root URL, no database
    reader_url: str
    redis: RedisServer
    prefix: str

    def env(self, **changes: str) -> dict[str, str]:
        settings = {"GRAPHRAG_DATABASE_URL": self.reader_url,
                    "GRAPHRAG_CDC_DATABASE_URL": f"{self.root}/doughnut",
                    "GRAPHRAG_SCHEMA": "doughnut-2026", "GRAPHRAG_CHANGE_SOURCE": "cdc",
                    "GRAPHRAG_READER_AUTH": "both", "GRAPHRAG_READER_TOKEN": "doctor-token",
                    "GRAPHRAG_REDIS_URL": self.redis.url(0), "GRAPHRAG_REDIS_PREFIX": self.prefix}
        return cli_env(**(settings | changes))

    def doctor(self, **changes: str) -> subprocess.CompletedProcess[bytes]:
        return graphrag("doctor", env=self.env(**changes))


def _loaded(root: str) -> str:
    url = f"{root}/doughnut"
    execute(root, "CREATE DATABASE doughnut CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    for step in (("db", "init"), ("db", "load-sample")):
        done = graphrag(*step, "--db", url)
        assert done.returncode == 0, done.stderr.decode()
    execute(root, f"CREATE USER '{READER}'@'%' IDENTIFIED BY 'reader-pw'",
            f"GRANT SELECT ON doughnut.* TO '{READER}'@'%'")
    return root.replace("root@", f"{READER}:reader-pw@") + "/doughnut"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    folder = tmp_path_factory.mktemp("doctor")
    with private_mariadb(folder) as root:
        cache = RedisServer(folder).start()
        client = redis.Redis.from_url(cache.url(0))
        client.config_set("maxmemory-policy", "volatile-lru")
        client.config_set("maxmemory", str(512 * 2**20))
        try:
            yield Deployment(root, _loaded(root), cache, f"doctor:{uuid.uuid4().hex[:8]}:v1")
        finally:
            client.close()
            cache.stop()


def lines(proc: subprocess.CompletedProcess[bytes]) -> list[str]:
    assert "Traceback" not in proc.stderr.decode(), proc.stderr.decode()
    return proc.stdout.decode().splitlines()


def assert_fails(proc: subprocess.CompletedProcess[bytes], check: str, *words: str) -> None:
    out = lines(proc)
    assert proc.returncode == 1, out
    failed = [i for i, line in enumerate(out) if line.startswith(f"FAIL {check}:")]
    assert len(failed) == 1, out
    fix = out[failed[0] + 1]
    assert fix.lstrip().startswith("fix: "), out
    for word in words:
        assert word in out[failed[0]] + fix, out
    assert sum(line.startswith("FAIL") for line in out) == 1, out


def test_a_correct_deployment_passes_every_check(deployment: Deployment) -> None:
    done = deployment.doctor()
    out = lines(done)
    assert done.returncode == 0, out
    assert [line.split(":")[0] for line in out] == [
        "ok   database", "ok   reader auth", "ok   grants", "ok   change source", "ok   redis",
        "ok   redis memory", "ok   key prefix"]
    assert "Doughnut since May 2026" in out[0] and "user_token" in out[2]
    assert "no GRAPHRAG_DOUGHNUT_URL" in out[1], "the web app's sessions then go to Doughnut"


def test_doughnuts_session_endpoint_answering_and_not(deployment: Deployment) -> None:
    with doughnut_stub() as stub:
        done = deployment.doctor(GRAPHRAG_DOUGHNUT_URL=stub.url)
        out = lines(done)
        assert done.returncode == 0 and out[-1].startswith("ok   doughnut:"), out
        assert "no GRAPHRAG_DOUGHNUT_URL" not in out[1]
        stub.sessions_down = True
        assert_fails(deployment.doctor(GRAPHRAG_DOUGHNUT_URL=stub.url), "doughnut",
                     "current-user", "GRAPHRAG_DOUGHNUT_URL")
    assert_fails(deployment.doctor(GRAPHRAG_DOUGHNUT_URL=f"http://127.0.0.1:{free_port()}"),
                 "doughnut", "did not answer", "GRAPHRAG_DOUGHNUT_URL")


def test_a_server_without_a_binary_log(deployment: Deployment, tmp_path: Path) -> None:
    with private_mariadb(tmp_path, log_bin=False) as other:
        _loaded(other)
        proc = graphrag("doctor", env=deployment.env(
            GRAPHRAG_DATABASE_URL=other.replace("root@", f"{READER}:reader-pw@") + "/doughnut",
            GRAPHRAG_CDC_DATABASE_URL=f"{other}/doughnut",
            GRAPHRAG_REDIS_PREFIX=f"doctor:{uuid.uuid4().hex[:8]}:v1"))
    assert_fails(proc, "change source", "log_bin", "Change capture")


def test_a_missing_grant(deployment: Deployment) -> None:
    execute(deployment.root, f"REVOKE SELECT ON doughnut.* FROM '{READER}'@'%'",
            *(f"GRANT SELECT ON doughnut.{t} TO '{READER}'@'%'" for t in (
                "note", "folder", "notebook", "note_wiki_title_cache", "ownership", "subscription",
                "circle_user", "bazaar_notebook")))
    try:
        assert_fails(deployment.doctor(), "grants", "user_token",
                     "GRANT SELECT ON doughnut.user_token")
        assert deployment.doctor(GRAPHRAG_READER_AUTH="shared").returncode == 1  # (auth's FAIL)
    finally:
        execute(deployment.root, f"GRANT SELECT ON doughnut.* TO '{READER}'@'%'")


def test_a_maxmemory_too_small_for_the_site(deployment: Deployment) -> None:
    client = redis.Redis.from_url(deployment.redis.url(0))
    client.config_set("maxmemory", str(2**20))
    try:
        assert_fails(deployment.doctor(), "redis memory", "need about", "maxmemory")
    finally:
        client.config_set("maxmemory", str(512 * 2**20))
        client.close()


def test_a_prefix_of_another_database(deployment: Deployment) -> None:
    prefix = f"doctor:{uuid.uuid4().hex[:8]}:v1"
    client = redis.Redis.from_url(deployment.redis.url(0))
    other = DatabaseIdentity.of("doughnut-2026", "elsewhere", [(1, "2020-01-01 00:00:00")])
    RedisBinding(client, Keys(prefix)).bind(other)
    assert_fails(deployment.doctor(GRAPHRAG_REDIS_PREFIX=prefix), "key prefix", other.digest,
                 "take-over")
    client.close()


def test_doughnuts_users_on_the_shared_token(deployment: Deployment) -> None:
    assert_fails(deployment.doctor(GRAPHRAG_READER_AUTH="shared"), "reader auth",
                 "GRAPHRAG_READER_AUTH=both")


def test_no_change_source_on_todays_doughnut(deployment: Deployment) -> None:
    assert_fails(deployment.doctor(GRAPHRAG_CHANGE_SOURCE="auto"), "change source",
                 "sends no events", "graphrag cdc")
