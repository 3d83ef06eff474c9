"""The monitoring against running processes: Debian's Prometheus on loopback scraping
``graphrag serve``, ``graphrag worker`` and ``graphrag cdc`` on a private binlog MariaDB, with real
Redis and real Celery worker processes (today's Doughnut, its users' tokens read too).

* Every metric that the alert rules and the dashboard name is in the ``/metrics`` of one of the
  running processes (scraped and parsed, never grepped from the code): a renamed metric fails here.
* Prometheus loads every rule, scrapes every process, and answers every dashboard query.
* The worker's endpoint adds up its pool processes: after an edit, its drain counters and its
  edit-to-fresh histogram have counted, in its scrape and in Prometheus.
* SIGKILL of ``graphrag cdc`` makes GraphragChangeFeedStopped pending, then firing, labelled with
  the killed instance (the test's copy of the rules waits 4 s instead of 2 min); a restart on the
  same port resolves it.

Only Prometheus's HTTP API and the processes' ``/metrics`` are polled, each wait bounded; no fixed
sleep decides anything.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.binlog_server import private_mariadb
from tests.cdc.site import Site, load_2026, running
from tests.e2e.conftest import ROOT, wait_until, worker_env
from tests.ops.monitoring import alert_rules, dashboard_exprs, metric_names
from tests.ops.prometheus_server import Prometheus, prometheus
from tests.ports import free_port
from tests.reliability.doughnut26 import Doughnut26

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

TOKEN = "monitoring-token"
FEED_ALERT = "GraphragChangeFeedStopped"
JOBS = ("graphrag-http", "graphrag-worker", "graphrag-cdc")
#: The sample names each kind of family exposes (a counter's family name has no ``_total``).
SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",),
            "histogram": ("_bucket", "_count", "_sum", "_created")}


@dataclass(frozen=True)
class Stack:
    site: Site
    ports: dict[str, int]
    prometheus: Prometheus

    def scrape(self, job: str) -> str:
        return httpx.get(f"http://127.0.0.1:{self.ports[job]}/metrics", timeout=10).text

    def sample(self, job: str, name: str, **labels: str) -> float:
        """The value of one sample in the job's scrape (0 when absent)."""
        for family in text_string_to_metric_families(self.scrape(job)):
            for sample in family.samples:
                if sample.name == name and labels.items() <= sample.labels.items():
                    return float(sample.value)
        return 0.0

    def cdc_restarted(self) -> None:
        self.site.cdc("--metrics-port", str(self.ports["graphrag-cdc"])).await_line("standing by|"
                                                                                  "following the log")


@contextlib.contextmanager
def serving(site: Site, port: int, folder: Path) -> Iterator[None]:
    """``graphrag serve`` on ``127.0.0.1:port`` with the site's settings, until the block ends."""
    log = folder / "serve.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", "from worker.cli.main import main; main()", "serve",
             "--host", "127.0.0.1", "--port", str(port)], env=worker_env(site.env), cwd=ROOT,
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: process.poll() is not None or _answers(port), timeout_s=60,
                   what="graphrag serve answers", details=lambda: log.read_text()[-3000:])
        assert process.poll() is None, log.read_text()[-3000:]
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _answers(port: int) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    return False


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("monitoring")
    ports = {job: free_port() for job in JOBS}
    settings = {"GRAPHRAG_READER_TOKEN": TOKEN, "GRAPHRAG_READER_AUTH": "both",
                "GRAPHRAG_WORKER_METRICS_PORT": str(ports["graphrag-worker"])}
    with private_mariadb(folder) as binlog, \
            running(binlog, folder, "doughnut-2026", load_2026, cli_workers=True, **settings) as site, \
            serving(site, ports["graphrag-http"], folder):
        site.cdc("--metrics-port", str(ports["graphrag-cdc"])).await_line("following the log")
        targets = {job: [f"127.0.0.1:{port}"] for job, port in ports.items()}
        with prometheus(folder / "prometheus", targets, {FEED_ALERT: "4s"}) as server:
            stack = Stack(site, ports, server)
            wait_until(lambda: set(server.targets_up().values()) == {"up"}, timeout_s=60,
                       what="Prometheus scrapes every process", details=lambda: str(
                           server.targets_up()) + server.log())
            yield stack


def exported(text: str) -> set[str]:
    """Every sample name a scrape's families can carry (listed even before a first sample)."""
    return {family.name + suffix for family in text_string_to_metric_families(text)
            for suffix in SUFFIXES.get(family.type, ("",))}


def test_every_metric_the_rules_and_the_dashboard_name_is_exported(stack: Stack) -> None:
    used = metric_names([rule["expr"] for rule in alert_rules()] + dashboard_exprs())
    assert len(used) >= 30
    scraped = {job: exported(stack.scrape(job)) for job in JOBS}
    missing = sorted(used - set().union(*scraped.values()))
    assert not missing, f"named by the rules or the dashboard, exported by no process: {missing}"
    assert "graphrag_http_responses_total" in scraped["graphrag-http"]
    assert "graphrag_edit_fresh_seconds_bucket" in scraped["graphrag-worker"]
    assert "graphrag_cdc_behind_seconds" in scraped["graphrag-cdc"]
    for job in ("graphrag-worker", "graphrag-cdc", "graphrag-http"):
        assert "graphrag_edit_stage_seconds_bucket" in scraped[job]


def test_the_worker_adds_up_what_its_pool_processes_counted(stack: Stack) -> None:
    doughnut = Doughnut26(stack.site.wiring.source.engine, random.Random(3))  # type: ignore[attr-defined]
    doughnut.rename(doughnut.notes()[2])  # committed: change capture announces it

    def counted() -> bool:
        stages = "graphrag_edit_stage_seconds_count"
        return (stack.sample("graphrag-worker", "graphrag_drain_batches_total") > 0
                and stack.sample("graphrag-worker", "graphrag_edit_fresh_seconds_count",
                                 lane="urgent") > 0
                and all(stack.sample("graphrag-cdc", stages, stage=s) > 0
                        for s in ("outdate", "enqueue"))  # where the edit arrived
                and all(stack.sample("graphrag-worker", stages, stage=s) > 0
                        for s in ("delivery", "resolve", "debounce", "compute", "write")))

    wait_until(counted, timeout_s=120, what="the worker's scrape counts the edit's drain",
               details=lambda: stack.scrape("graphrag-worker")[-3000:], interval_s=0.2)
    assert stack.sample("graphrag-worker", "graphrag_rebuilt_snapshots_total", path="drain") > 0
    assert stack.sample("graphrag-worker", "graphrag_redis_up") == 1
    assert stack.sample("graphrag-worker", "graphrag_redis_maxmemory_bytes") >= 0
    wait_until(lambda: stack.prometheus.api("query", query="sum(graphrag_drain_batches_total)")
               ["result"], timeout_s=60, what="Prometheus has the drains")


def test_prometheus_loads_every_rule_and_answers_every_dashboard_query(stack: Stack) -> None:
    names = [rule["alert"] for rule in alert_rules()]

    def evaluated() -> list[str]:
        rules = [r for g in stack.prometheus.api("rules", type="alert")["groups"] for r in g["rules"]]
        return [r["name"] for r in rules if r["health"] == "ok"]

    wait_until(lambda: sorted(evaluated()) == sorted(names), timeout_s=60,
               what="every rule loaded and evaluated", details=lambda: str(evaluated()))
    for expr in dashboard_exprs():
        stack.prometheus.api("query", query=expr)  # an invalid query is an error answer
    note = Doughnut26(stack.site.wiring.source.engine, random.Random(1)).notes()[0]  # type: ignore[attr-defined]
    answer = httpx.get(f"http://127.0.0.1:{stack.ports['graphrag-http']}/api/notes/{note}/graph",
                       params={"tokenLimit": "1000"}, headers={"Authorization": "Bearer unknown"},
                       timeout=30)  # Doughnut's path with a token no user has
    looked_up = stack.sample("graphrag-http", "graphrag_token_lookups_total", outcome="unknown")
    assert looked_up >= 1, (answer.status_code, answer.text[:300])


def test_a_killed_change_feed_fires_its_alert_naming_the_instance_and_a_restart_resolves_it(
        stack: Stack) -> None:
    instance = f"127.0.0.1:{stack.ports['graphrag-cdc']}"
    wait_until(lambda: not stack.prometheus.alerts(FEED_ALERT), timeout_s=60,
               what="no feed alert while graphrag cdc runs")
    seen: list[str] = []

    def firing() -> list[dict[str, object]]:
        alerts = stack.prometheus.alerts(FEED_ALERT)
        seen.extend(str(a["state"]) for a in alerts)
        return [a for a in alerts if a["state"] == "firing"]

    stack.site.started[-1].kill()
    fired = wait_until(firing, timeout_s=60, what=f"{FEED_ALERT} fires", interval_s=0.05,
                       details=lambda: f"states seen: {seen}\n{stack.prometheus.log()}")
    assert "pending" in seen and seen.index("pending") < seen.index("firing"), seen
    (alert,) = fired
    assert alert["labels"]["instance"] == instance
    assert alert["labels"]["job"] == "graphrag-cdc" and alert["labels"]["severity"] == "critical"
    assert alert["annotations"]["runbook_url"] == "ops/runbook.md#graphragchangefeedstopped"
    stack.cdc_restarted()
    wait_until(lambda: not stack.prometheus.alerts(FEED_ALERT), timeout_s=60,
               what=f"the restart resolves {FEED_ALERT}", details=stack.prometheus.log)
