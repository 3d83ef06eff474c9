"""Bounded staleness end to end: when ``graphrag cdc`` stops, the reader stops trusting snapshots.

Doughnut today on the private binlog MariaDB, real workers, the real ``graphrag cdc`` and the HTTP
reader in-process, with ``GRAPHRAG_MAX_FEED_LAG_S=3``. An idle database keeps the heartbeat fresh
(the feed pings the server's position every second): no false degradation over 30 s without a
write. Then the feed is SIGKILLed and a title is renamed in plain SQL, which no event announces:
once the bound has passed, every read of an affected note is computed live, equals a live compute
and says why (``X-Graphrag-Reason``), and ``/healthz`` says ``degraded``. Restarted, the feed
replays the rename; snapshots are served again (``cache``) and equal a live compute. Retired with
``graphrag cdc --forget`` (refused while an instance runs), the feed is no longer waited for.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from graphrag import Request
from tests.cdc.site import Site, load_2026, running
from tests.e2e.conftest import ROOT, wait_until, worker_env
from tests.reliability.doughnut26 import Doughnut26
from tests.reliability.support import figure
from worker.http.server import build_http_app

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

BOUND_S = 3
TOKEN = "feed-bound-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
IDLE_S = 30


@pytest.fixture(scope="module")
def site(binlog_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder: Path = tmp_path_factory.mktemp("cdc-feed")
    with running(binlog_server, folder, "doughnut-2026", load_2026,
                 GRAPHRAG_MAX_FEED_LAG_S=str(BOUND_S), GRAPHRAG_READER_TOKEN=TOKEN) as site:
        site.cdc().await_line("following the log")
        yield site


@pytest.fixture(scope="module")
def http(site: Site) -> Iterator[TestClient]:
    with TestClient(build_http_app(site.wiring.settings), raise_server_exceptions=False) as client:
        heartbeat = site.wiring.keys.cdc_heartbeat()
        wait_until(lambda: site.wiring.client.exists(heartbeat)
                   and client.get("/healthz").json()["feed"] == "ok", timeout_s=30,
                   what="the reader trusts the feed", details=lambda: str(client.get("/healthz").json()))
        yield client


def _graph(http: TestClient, note: int) -> tuple[int, str, str | None, bytes]:
    response = http.get(f"/api/notes/{note}/graph?tokenLimit=2000", headers=AUTH)
    return (response.status_code, response.headers["X-Graphrag-Source"],
            response.headers.get("X-Graphrag-Reason"), response.content)


def _live(site: Site, note: int) -> bytes:
    return site.wiring.service.compute(Request(note, None, 2000, 0, 2000), "focus-context").to_json()


def test_an_idle_database_keeps_the_heartbeat_fresh(site: Site, http: TestClient) -> None:
    note = Doughnut26(site.wiring.source.engine, random.Random(5)).notes()[0]  # type: ignore[attr-defined]
    reasons: list[str] = []
    ends = time.monotonic() + IDLE_S
    while time.monotonic() < ends:
        health = http.get("/healthz").json()
        status, source, reason, _ = _graph(http, note)
        if health["status"] != "ok" or reason is not None or status != 200:
            reasons.append(f"{health} / {status} {source} / {reason}")
        time.sleep(0.5)
    assert reasons == [], reasons[:3]


def test_a_stopped_feed_turns_every_read_live_until_it_catches_up(site: Site, http: TestClient) -> None:
    doughnut = Doughnut26(site.wiring.source.engine, random.Random(11))  # type: ignore[attr-defined]
    note = doughnut.notes()[3]
    assert _graph(http, note)[1] == "cache"
    site.started[-1].kill()
    killed = time.monotonic()
    doughnut.rename(note)  # committed; its event is in the log, which nobody reads now
    affected = [note, *(r[0] for r in doughnut.rows(
        "SELECT DISTINCT note_id FROM note_wiki_title_cache WHERE target_note_id = :n", n=note))]

    def all_live() -> bool:
        return all(_graph(http, n)[1] == "live" for n in affected)

    wait_until(all_live, timeout_s=BOUND_S + 30, what="reads are computed live once the feed is old",
               details=lambda: str(http.get("/healthz").json()), interval_s=0.05)
    figure(f"feed bound ({BOUND_S} s): seconds from the SIGKILL of graphrag cdc to every read live",
           f"{time.monotonic() - killed:.1f}")
    for n in affected:
        status, source, reason, body = _graph(http, n)
        assert (status, source) == (200, "live") and reason and "change feed" in reason
        assert body == _live(site, n), n
    health = http.get("/healthz")
    assert health.status_code == 200 and health.json()["status"] == "degraded"
    assert "change feed" in health.json()["feed"]

    site.cdc().await_line("following the log")
    wait_until(lambda: http.get("/healthz").json()["status"] == "ok", timeout_s=60,
               what="the restarted feed catches up", details=lambda: site.started[-1].log()[-2000:])
    site.settle()
    for n in affected:
        status, source, reason, body = _graph(http, n)
        if source != "cache":  # outdated by the replayed event and read before its rebuild
            status, source, reason, body = _graph(http, n)
        assert (status, source, reason) == (200, "cache", None), n
        assert body == _live(site, n), n


def test_retiring_change_capture_stops_the_wait_for_its_heartbeat(site: Site, http: TestClient) -> None:
    """``graphrag cdc --forget`` is refused while an instance runs; once it is stopped, forgetting
    its position and heartbeat makes a stopped feed no reason to distrust snapshots (and, with no
    webhook secret either, ``/healthz`` names the missing change source)."""
    refused = _cdc_command(site, "--forget")
    assert refused.returncode == 1 and b"running" in refused.stderr
    assert b"Traceback" not in refused.stderr
    site.started[-1].stop()
    wait_until(lambda: http.get("/healthz").json()["status"] == "degraded", timeout_s=BOUND_S + 30,
               what="the stopped feed is noticed", details=lambda: str(http.get("/healthz").json()))
    done = _cdc_command(site, "--forget")
    assert done.returncode == 0, done.stderr
    keys = site.wiring.keys
    assert not site.wiring.client.exists(keys.cdc_heartbeat(), keys.cdc_position())
    note = Doughnut26(site.wiring.source.engine, random.Random(5)).notes()[0]  # type: ignore[attr-defined]
    wait_until(lambda: _graph(http, note)[:3] == (200, "cache", None), timeout_s=30,
               what="snapshots are trusted again", details=lambda: str(_graph(http, note)[:3]))
    # ... and /healthz says truthfully that nothing follows the edits now (GRAPHRAG_CHANGE_SOURCE=auto)
    health = http.get("/healthz").json()
    assert health["status"] == "degraded" and health["feed"].startswith("no change source"), health


def _cdc_command(site: Site, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", "from worker.cli.main import main; main()", "cdc",
                           *args], env=worker_env(site.env), cwd=ROOT, capture_output=True, timeout=60)
