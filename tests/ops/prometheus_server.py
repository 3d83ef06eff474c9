"""Debian's Prometheus, started by a test on loopback with a configuration the test writes.

* It listens on ``127.0.0.1`` on a port chosen at run time, keeps its data in the test's own
  directory, scrapes and evaluates every second, and is stopped (SIGTERM, then SIGKILL) on exit.
* The scrape jobs are the committed ones (ops/prometheus/prometheus.yml: the rules name them), each
  pointed at the test's own processes instead of Compose's service names.
* The rules are the committed ones, with the ``for:`` of the alerts the test names shortened, so
  an alert goes pending and firing within seconds; everything else is as shipped.
* Reads go through Prometheus's HTTP API. A server that does not become ready is a test failure
  with the tail of its log, never a skip.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.e2e.conftest import wait_until
from tests.ops.monitoring import PROMETHEUS_CONFIG, RULES, alert_rules, tool
from tests.ports import free_port

__all__ = ["Prometheus", "prometheus"]


@dataclass(frozen=True)
class Prometheus:
    url: str
    log_path: Path

    def api(self, path: str, **params: str) -> Any:
        """The ``data`` of a successful answer of ``/api/v1/<path>``; a failed one fails the test."""
        body = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=10).json()
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """The pending or firing alerts called ``name``."""
        return [a for a in self.api("alerts")["alerts"] if a["labels"]["alertname"] == name]

    def targets_up(self) -> dict[str, str]:
        """Each active target's ``job/instance`` and its health."""
        return {f"{t['labels']['job']}/{t['labels']['instance']}": t["health"]
                for t in self.api("targets")["activeTargets"]}

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""


def _config(targets: Mapping[str, list[str]], rules: Path) -> dict[str, Any]:
    """The committed configuration, scraping ``targets`` (job -> host:port) every second."""
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    config["global"] = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(rules)]
    for job in config["scrape_configs"]:
        job.pop("dns_sd_configs")
        job["static_configs"] = [{"targets": targets[job["job_name"]]}]
    return config


def _rules(short: Mapping[str, str]) -> dict[str, Any]:
    """The committed rules, the alerts named in ``short`` waiting that long instead."""
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for rule in (r for group in groups["groups"] for r in group["rules"]):
        rule["for"] = short.get(rule.get("alert", ""), rule.get("for"))
    return groups


@contextlib.contextmanager
def prometheus(folder: Path, targets: Mapping[str, list[str]],
               short: Mapping[str, str]) -> Iterator[Prometheus]:
    """A running Prometheus scraping ``targets``, with the rules' ``for:`` of ``short``."""
    assert set(short) <= {rule["alert"] for rule in alert_rules()}
    folder.mkdir(parents=True, exist_ok=True)
    rules, config = folder / "rules.yml", folder / "prometheus.yml"
    rules.write_text(yaml.safe_dump(_rules(short)), encoding="utf-8")
    config.write_text(yaml.safe_dump(_config(targets, rules)), encoding="utf-8")
    port = free_port()
    server = Prometheus(f"http://127.0.0.1:{port}", folder / "prometheus.log")
    with server.log_path.open("wb") as log:
        process = subprocess.Popen(
            [tool("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder)
    try:
        wait_until(lambda: process.poll() is not None or _ready(server), timeout_s=60,
                   what="Prometheus is ready", details=server.log, interval_s=0.1)
        if process.poll() is not None:
            pytest.fail(f"prometheus exited with {process.returncode}:\n{server.log()}", pytrace=False)
        yield server
    finally:
        _stop(process)


def _ready(server: Prometheus) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"{server.url}/-/ready", timeout=2).status_code == 200
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
