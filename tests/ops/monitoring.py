"""What the monitoring tests share: the files of ops/prometheus and ops/grafana, the metric names
their queries use, the runbook's alert sections, and Debian's promtool.

A missing ``promtool`` (Debian's ``prometheus`` package, which .ci/run installs) is a test failure
naming the package, never a skip.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

__all__ = [
    "DASHBOARD", "PROMETHEUS_CONFIG", "RULES", "RULE_TESTS", "RUNBOOK", "alert_rules",
    "dashboard_exprs", "headings", "metric_names", "promtool", "rule_jobs", "tool",
]

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "ops" / "prometheus" / "rules" / "graphrag.yml"
RULE_TESTS = ROOT / "ops" / "prometheus" / "tests" / "graphrag_test.yml"
PROMETHEUS_CONFIG = ROOT / "ops" / "prometheus" / "prometheus.yml"
DASHBOARD = ROOT / "ops" / "grafana" / "dashboards" / "graphrag.json"
RUNBOOK = ROOT / "ops" / "runbook.md"
#: The service's metric names: every one starts so (PromQL's own words and ``up`` do not).
_METRIC = re.compile(r"\bgraphrag_[a-z0-9_]+\b")


def tool(name: str) -> str:
    """The path of a binary of Debian's ``prometheus`` package, or a test failure."""
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if found is None:
        pytest.fail(f"{name} is required (Debian's package `prometheus`: "
                    "apt-get install -y --no-install-recommends prometheus)", pytrace=False)
    return found


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("promtool"), *args], capture_output=True, text=True, timeout=120,
                          check=False, cwd=ROOT)


def alert_rules(path: Path = RULES) -> list[dict[str, Any]]:
    """Every alerting rule of the rules file, in order."""
    groups = yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def rule_jobs() -> set[str]:
    """The scrape jobs the rules name (``job="..."``)."""
    return {job for rule in alert_rules() for job in re.findall(r'job="([^"]+)"', rule["expr"])}


def dashboard_exprs() -> list[str]:
    """The PromQL of every query of every panel of the committed dashboard."""
    panels = json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"]
    return [target["expr"] for panel in panels for target in panel.get("targets", [])]


def metric_names(exprs: list[str]) -> set[str]:
    """The service's metric names that ``exprs`` use (``graphrag_...``, suffixes included)."""
    return {name for expr in exprs for name in _METRIC.findall(expr)}


def headings(markdown: str) -> Iterator[str]:
    """The anchors of a Markdown file's headings, as GitHub makes them (not in code blocks)."""
    fenced = False
    for line in markdown.splitlines():
        fenced ^= line.lstrip().startswith("```")
        if not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            yield re.sub(r"[^\w\- ]", "", match[1].strip().lower()).replace(" ", "-")
