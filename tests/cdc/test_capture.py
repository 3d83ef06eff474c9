"""``graphrag cdc`` end to end: plain SQL on a database with a binary log reaches every snapshot.

A private MariaDB with a ROW binary log (the session's ``binlog_server``) holds a fresh database per
module; snapshots are rebuilt in-process, then real Celery worker processes and the real ``graphrag
cdc`` command run beside it. No webhook is sent: Doughnut's writes are plain ``UPDATE``/``INSERT``/
``DELETE`` statements, and afterwards every snapshot must match the database (the 2025 content check
of the reliability suites; for 2026 every snapshot equals a live compute). Crash safety: ``SIGKILL``
of ``graphrag cdc`` during a stream of committed edits, restart, nothing missed; a second instance
takes over from a killed first; a purged position means a full rebuild; a bad setup is one line.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from graphrag import Request
from service.decoding import decode_envelope
from service.envelope import SnapshotKey
from storage.database import open_engine
from storage.redis.client import delete_prefix
from tests.binlog_server import create_cdc_user, execute, private_mariadb
from tests.cdc.site import Site, load_2025, load_2026, running
from tests.e2e.conftest import ROOT, connect, redis_url, wait_until, worker_env
from tests.ports import free_port
from tests.reliability.checks import check_snapshots
from tests.reliability.doughnut26 import Doughnut26
from tests.reliability.support import figure, sized

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

EDITS_UNDER_KILL = sized(ci=1_200, full=5_000)


@pytest.fixture(scope="module")
def tree(binlog_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("cdc-2025")
    with running(binlog_server, folder, "doughnut-2025", load_2025) as site:
        # a port the kernel just handed out and took back, not a random pick: one of those once
        # fell on a port in use, and every test of the module failed at setup
        site.metrics_port = free_port()
        site.cdc("--metrics-port", str(site.metrics_port)).await_line("following the log")
        yield site


def _metric(site: Site, name: str) -> float:
    text_ = httpx.get(f"http://127.0.0.1:{site.metrics_port}/metrics", timeout=5).text
    found = re.search(rf"^{name} ([0-9.e+-]+)$", text_, re.M)
    assert found, f"{name} not exposed"
    return float(found.group(1))


def _tree_problems(site: Site) -> str:
    report = check_snapshots(site.wiring.source.engine, site.wiring.cache,  # type: ignore[attr-defined]
                             site.wiring.settings, site.wiring.service)
    return "" if report.bad == 0 else report.summary()


# -- 2025 ------------------------------------------------------------------------------------------
def test_every_kind_of_sql_edit_reaches_the_snapshots(tree: Site) -> None:
    tree.sql("UPDATE note SET topic_constructor = 'Title by SQL' WHERE id = 12",
             "UPDATE note SET description = 'Details by SQL' WHERE id = 21",
             "UPDATE note SET parent_id = 3 WHERE id = 13",  # a move, no updated_at
             "UPDATE note SET deleted_at = UTC_TIMESTAMP() WHERE id IN (44, 58)",
             "INSERT INTO note (id, parent_id, target_note_id, sibling_order, topic_constructor, "
             "created_at, updated_at) VALUES (90, 30, 22, 5000, 'A new link', UTC_TIMESTAMP(), "
             "UTC_TIMESTAMP())")
    tree.sql("BEGIN", "UPDATE note SET topic_constructor = 'Multi one' WHERE id = 14",
             "UPDATE note SET topic_constructor = 'Multi two' WHERE id = 15", "COMMIT")
    tree.sql("UPDATE note SET deleted_at = NULL WHERE id = 44", "DELETE FROM note WHERE id = 58")
    tree.settle()
    assert _tree_problems(tree) == ""
    shown = tree.wiring.cache.read(SnapshotKey(12, "wavefront", 0)) or b""
    assert b"Title by SQL" in shown
    assert (_metric(tree, "graphrag_cdc_transactions_total") >= 5
            and _metric(tree, "graphrag_cdc_events_total") >= 7)
    wait_until(lambda: _metric(tree, "graphrag_cdc_behind_seconds") < 2, timeout_s=10,
               what="the lag gauge says caught up")


def test_a_rolled_back_transaction_changes_nothing(tree: Site) -> None:
    before = tree.wiring.cache.read(SnapshotKey(20, "wavefront", 0))
    tree.sql("BEGIN", "UPDATE note SET topic_constructor = 'Never committed' WHERE id = 20", "ROLLBACK")
    tree.sql("UPDATE note SET description = 'a later commit' WHERE id = 60")  # so the log moves on
    tree.settle()
    assert tree.wiring.cache.read(SnapshotKey(20, "wavefront", 0)) == before
    assert b"Never committed" not in (before or b"")


def test_sigkill_during_a_stream_of_edits_misses_nothing(tree: Site) -> None:
    first = tree.started[-1]

    def edits() -> None:
        for i in range(EDITS_UNDER_KILL):
            note = 10 + i % 50
            tree.sql(f"UPDATE note SET topic_constructor = 'Stream {i} of {note}' WHERE id = {note}")

    writer = threading.Thread(target=edits)
    writer.start()
    time.sleep(1.0)
    first.kill()
    positions = tree.wiring.client.get(tree.wiring.keys.cdc_position())
    writer.join()
    tree.cdc().await_line("following the log")
    tree.settle()
    assert _tree_problems(tree) == ""
    assert tree.wiring.client.get(tree.wiring.keys.cdc_position()) != positions
    figure("cdc: committed edits while graphrag cdc was SIGKILLed and restarted", EDITS_UNDER_KILL)


def test_a_second_instance_takes_over_when_the_first_is_killed(tree: Site) -> None:
    active = tree.started[-1]
    standby = tree.cdc()
    standby.await_line("standing by")
    active.kill()
    standby.await_line("following the log", timeout_s=15)
    tree.sql("UPDATE note SET topic_constructor = 'After the takeover' WHERE id = 16")
    wait_until(lambda: b"After the takeover" in (tree.wiring.cache.read(SnapshotKey(16, "wavefront", 0))
                                                  or b""),
               timeout_s=30, what="an edit after the takeover reaches its snapshot",
               details=lambda: standby.log()[-2000:])


def test_a_purged_position_means_a_full_rebuild(tree: Site) -> None:
    tree.started[-1].stop()
    tree.sql("UPDATE note SET topic_constructor = 'While nobody listened' WHERE id = 17")
    _purge_all_but_a_new_log(tree.url.rsplit("/", 1)[0])
    restarted = tree.cdc()
    restarted.await_line("full rebuild: the stored log position is no longer on the server")
    key = SnapshotKey(17, "wavefront", 0)
    wait_until(lambda: b"While nobody listened" in (tree.wiring.cache.read(key) or b""),
               timeout_s=60, what="the full rebuild after the purge",
               details=lambda: restarted.log()[-2000:])
    restarted.await_line("following the log")


def _purge_all_but_a_new_log(root: str) -> None:
    """Rotate, then PURGE until only the new file is left (MariaDB keeps a file until InnoDB's next
    flush has made its transactions durable, and says nothing when it keeps one)."""
    execute(root, "FLUSH BINARY LOGS")
    deadline = time.monotonic() + 15
    while len(files := _binlog_files(root)) > 1:
        assert time.monotonic() < deadline, f"the server kept {files}"
        execute(root, f"PURGE BINARY LOGS TO '{files[-1]}'")
        time.sleep(0.2)


def _binlog_files(root: str) -> list[str]:
    engine = open_engine(root)
    try:
        with engine.connect() as conn:
            return [str(row[0]) for row in conn.execute(text("SHOW BINARY LOGS"))]
    finally:
        engine.dispose()


# -- 2026 ------------------------------------------------------------------------------------------
def test_doughnut_2026_writes_reach_every_snapshot_without_a_webhook(
        binlog_server: str, tmp_path: Path) -> None:
    with running(binlog_server, tmp_path, "doughnut-2026", load_2026) as site:
        site.cdc().await_line("following the log")
        doughnut = Doughnut26(open_engine(site.url), random.Random(3))
        keys = list(site.wiring.client.scan_iter(match=f"{site.wiring.keys.prefix}:snap:*"))
        initial = dict(zip(keys, site.wiring.client.mget(keys), strict=True))
        kinds = {kind: 0 for kind in Doughnut26.KINDS}
        for step in range(sized(ci=80, full=600)):
            kind = Doughnut26.KINDS[step % len(Doughnut26.KINDS)]
            doughnut.edit(kind)  # the events it returns are not sent: the log is the only input
            kinds[kind] += 1
        site.settle()
        stale = []
        live = "SELECT id FROM note WHERE deleted_at IS NULL AND notebook_id IS NOT NULL"
        for focus in doughnut.rows(live):
            for seed in (None, 0):
                key = SnapshotKey(focus[0], "focus-context", seed)
                env = decode_envelope(site.wiring.cache.read(key))
                want = site.wiring.service.compute(
                    Request(focus[0], seed, env.result_limit if env else 2000, 0,
                            env.result_limit if env else 2000), "focus-context")
                if env is None or env.result_json != want.to_json():
                    stale.append((focus[0], seed))
        changed = sum(site.wiring.client.get(k) != v for k, v in initial.items())
        figure("cdc 2026: edits by kind (SQL only) / snapshots changed / stale",
               f"{kinds} / {changed} / {len(stale)}")
        assert stale == [] and changed > len(initial) // 4


# -- bad setup -------------------------------------------------------------------------------------
def _cdc_once(env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", "from worker.cli.main import main; main()", "cdc"],
                          env=worker_env(env), cwd=ROOT, capture_output=True, timeout=60)


def test_a_missing_privilege_is_one_line_and_nothing_starts(tree: Site) -> None:
    name = tree.url.rsplit("/", 1)[1]
    weak = create_cdc_user(tree.url.rsplit("/", 1)[0], f"weak{uuid.uuid4().hex[:6]}", database=name,
                           global_privileges=("REPLICATION CLIENT",))
    done = _cdc_once({**tree.env, "GRAPHRAG_DATABASE_URL": weak})
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "REPLICATION SLAVE" in lines[0], lines
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("option", ["log_bin", "statement"])
def test_a_server_without_a_row_log_is_one_line(option: str, tmp_path: Path) -> None:
    kwargs: dict[str, Any] = ({"log_bin": False} if option == "log_bin"
                              else {"binlog_format": "STATEMENT"})
    with private_mariadb(tmp_path, **kwargs) as root:
        execute(root, "CREATE DATABASE d")
        engine = open_engine(f"{root}/d")
        load_2025(engine)
        engine.dispose()
        prefix = f"graphrag-cdc:{uuid.uuid4().hex}:v1"  # never the default prefix of the shared Redis
        done = _cdc_once({"GRAPHRAG_DATABASE_URL": f"{root}/d", "GRAPHRAG_REDIS_URL": redis_url(),
                          "GRAPHRAG_SCHEMA": "doughnut-2025", "GRAPHRAG_REDIS_PREFIX": prefix})
        client = connect(redis_url(), "the snapshot store")
        delete_prefix(client, prefix)
        client.close()
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, lines
    assert ("log_bin" in lines[0]) if option == "log_bin" else ("binlog_format" in lines[0]), lines
