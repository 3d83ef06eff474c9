"""A site for the change-capture tests: a database on the private binlog MariaDB, snapshots in
Redis under their own prefix, real Celery workers, and ``graphrag cdc`` processes started and
killed by the test (the modules of tests/cdc share it)."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from storage.database import open_engine
from storage.profiles import admin_2025, admin_2026
from tests.binlog_server import execute
from tests.e2e.conftest import ROOT, Workers, broker_database, connect, redis_url, wait_until, worker_env
from tests.e2e.worker_system import hand_graph
from tests.reliability.harness import Broker, settings_from, settle
from tests.reliability.support import sized
from tests.storage.wiki_rows import random_graph, table_rows
from worker.compose import Wiring

__all__ = ["Cdc", "Site", "load_2025", "load_2026", "running"]


class Cdc:
    """One ``graphrag cdc`` process (its own session), logging to a file."""

    def __init__(self, env: dict[str, str], log_path: Path, *args: str) -> None:
        self.env, self.log_path, self.args = env, log_path, args
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Cdc:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "from worker.cli.main import main; main()", "cdc", *self.args],
                env=self.env,
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def await_line(self, pattern: str, timeout_s: float = 30) -> None:
        wait_until(lambda: re.search(pattern, self.log()), timeout_s=timeout_s,
                   what=f"graphrag cdc logs {pattern!r}", details=lambda: self.log()[-3000:])

    def kill(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Site:
    env: dict[str, str]
    wiring: Wiring
    url: str
    broker: Broker
    workers: Workers
    folder: Path
    started: list[Cdc]
    metrics_port: int = 0  # where the first ``graphrag cdc`` serves its metrics, when asked

    def cdc(self, *args: str) -> Cdc:
        log = self.folder / f"cdc-{len(self.started)}.log"
        process = Cdc(worker_env(self.env), log, *args).start()
        self.started.append(process)
        return process

    def sql(self, *statements: str) -> None:
        execute(self.url.rsplit("/", 1)[0], *statements, database=self.url.rsplit("/", 1)[1])

    def settle(self) -> None:
        settle(self.wiring.cache, self.wiring.dirty, self.broker, timeout_s=sized(ci=120, full=600),
               details=lambda: self.workers.current.tail() + self.started[-1].log()[-2000:],
               stable_s=2.0)


@contextlib.contextmanager
def running(binlog_server: str, folder: Path, schema: str, load: Any, *, cli_workers: bool = False,
            **extra_env: str) -> Iterator[Site]:
    """The site; its workers run as ``graphrag worker`` with ``cli_workers`` (else through
    ``celery -A worker.celery.app``)."""
    base = redis_url()
    connect(base, "the snapshot store").close()
    name = f"cdc_e2e_{uuid.uuid4().hex[:8]}"
    execute(binlog_server, f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    url = f"{binlog_server}/{name}"
    engine = open_engine(url)
    load(engine)
    with broker_database(base) as broker_url:
        prefix = f"graphrag-cdc:{uuid.uuid4().hex}:v1"
        env = {"GRAPHRAG_DATABASE_URL": url, "GRAPHRAG_REDIS_URL": base, "GRAPHRAG_REDIS_PREFIX": prefix,
               "CELERY_BROKER_URL": broker_url, "GRAPHRAG_SCHEMA": schema, "GRAPHRAG_SEEDS": "0",
               "GRAPHRAG_CDC_LEASE_MS": "2000", "GRAPHRAG_CDC_SERVER_ID": str(random.randint(10, 10**6))}
        if schema == "doughnut-2025":
            env["GRAPHRAG_STRATEGIES"] = "wavefront"
        env.update(extra_env)
        settings = settings_from(env)
        wiring, workers = Wiring(settings), Workers(worker_env(env), folder, cli=cli_workers)
        site = Site(env, wiring, url, Broker(redis.Redis.from_url(broker_url)), workers, folder, [])
        try:
            assert wiring.rebuild(wiring.source.live_ids_after(0, 10**6)).errors == {}
            workers.start()
            yield site
        finally:
            for process in site.started:
                process.stop()
            workers.stop_all()
            for key in wiring.client.scan_iter(match=f"{prefix}:*", count=1000):
                wiring.client.delete(key)
            wiring.source.engine.dispose()  # type: ignore[attr-defined]
            engine.dispose()
            execute(binlog_server, f"DROP DATABASE `{name}`")


def load_2025(engine: Any) -> None:
    admin_2025.create_tables(engine)
    admin_2025.insert_notes(engine, hand_graph().records())


def load_2026(engine: Any) -> None:
    admin_2026.create_tables(engine)
    admin_2026.insert_rows(engine, table_rows(random_graph(13, notes=50)))
