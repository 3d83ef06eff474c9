"""The runbook's production start on today's Doughnut, with real processes and the compose defaults.

``graphrag cdc``, ``graphrag worker`` and ``graphrag serve --public-port`` run as the compose file
runs them (GRAPHRAG_CHANGE_SOURCE=cdc, GRAPHRAG_READER_AUTH=both) on a private binlog MariaDB: a
Doughnut user's token reads on the public listener, a plain SQL edit reaches that user's snapshot
(no webhook: Doughnut sends none), ``/healthz`` is ok; and once change capture stops, ``/healthz``
is not ok and says why.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from tests.cdc.site import Site, load_2026, running
from tests.e2e.conftest import ROOT, wait_until, worker_env
from tests.ports import free_port
from tests.proxy_support import wait_listening

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

TOKEN, USER_TOKEN = "production-start-token", "production-start-user-token"


@pytest.fixture
def site(binlog_server: str, tmp_path: Path) -> Iterator[Site]:
    with running(binlog_server, tmp_path, "doughnut-2026", load_2026, cli_workers=True,
                 GRAPHRAG_CHANGE_SOURCE="cdc", GRAPHRAG_READER_AUTH="both",
                 GRAPHRAG_READER_TOKEN=TOKEN, GRAPHRAG_MAX_FEED_LAG_S="3") as started:
        yield started


def _owned_note(site: Site) -> int:
    """A live note whose notebook a user owns, that user given an access token."""
    with site.wiring.source.engine.begin() as conn:  # type: ignore[attr-defined]
        note, user = conn.execute(text(
            "SELECT n.id, o.user_id FROM note n JOIN notebook b ON b.id = n.notebook_id "
            "JOIN ownership o ON o.id = b.ownership_id WHERE o.user_id IS NOT NULL "
            "AND n.deleted_at IS NULL ORDER BY n.id LIMIT 1")).one()
    site.sql(f"INSERT INTO user_token (user_id, token, label) VALUES ({user}, '{USER_TOKEN}', 't')")
    return int(note)


def _serve(site: Site, internal: int, public: int) -> subprocess.Popen[bytes]:
    log = (site.folder / "serve.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-c", "from worker.cli.main import main; main()", "serve", "--port",
         str(internal), "--public-port", str(public)], env=worker_env(site.env), cwd=ROOT,
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def test_the_production_start_follows_edits_and_says_when_it_cannot(site: Site) -> None:
    note = _owned_note(site)
    capture = site.cdc()
    capture.await_line("following the log")
    internal, public = free_port(), free_port()
    serve = _serve(site, internal, public)
    try:
        for port in (internal, public):
            wait_listening(port, "graphrag serve", lambda: serve.poll() is None, seconds=60)
        path = f"http://127.0.0.1:{public}/api/notes/{note}/graph?tokenLimit=2000"
        headers = {"Authorization": f"Bearer {USER_TOKEN}"}

        def health() -> dict[str, str]:
            answer: dict[str, str] = httpx.get(f"http://127.0.0.1:{internal}/healthz").json()
            return answer

        wait_until(lambda: health()["status"] == "ok", timeout_s=60, what="/healthz ok",
                   details=lambda: str(health()))
        assert httpx.get(path, headers=headers).status_code == 200
        site.sql(f"UPDATE note SET content = 'Edited in the production start' WHERE id = {note}")

        def fresh() -> bool:
            read = httpx.get(path, headers=headers)
            return (b"Edited in the production start" in read.content
                    and read.headers.get("X-Graphrag-Source") == "cache")

        wait_until(fresh, timeout_s=120, what="the SQL edit reaches the user's snapshot",
                   details=lambda: site.workers.current.tail() + capture.log()[-2000:])
        capture.kill()
        wait_until(lambda: health()["status"] == "degraded", timeout_s=60,
                   what="/healthz says the feed stopped", details=lambda: str(health()))
        assert "heartbeat" in health()["feed"]
    finally:
        serve.terminate()
        serve.wait(30)
