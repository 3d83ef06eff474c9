"""The alert rules (ops/prometheus/rules) under Debian's promtool, and the runbook as their other half.

``promtool check rules`` parses them and ``promtool test rules`` runs their unit tests, in which
every alert must fire on its series and stay quiet on a healthy one. Every rule has a ``for:``, a
severity and a runbook link to a section of ops/runbook.md named after it, and the runbook's
"Alerts" table lists exactly the rules, with their severity and ``for:``. The compose file's
Prometheus configuration passes ``promtool check config`` and scrapes every job the rules name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from tests.ops.monitoring import (
    PROMETHEUS_CONFIG,
    RULE_TESTS,
    RULES,
    RUNBOOK,
    alert_rules,
    headings,
    promtool,
    rule_jobs,
)

SEVERITIES = {"critical", "warning"}


def test_promtool_accepts_the_rules() -> None:
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in done.stdout


def test_the_rules_pass_their_unit_tests() -> None:
    done = promtool("test", "rules", str(RULE_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_unit_test_that_fires_and_one_that_stays_quiet() -> None:
    expectations: dict[str, set[bool]] = defaultdict(set)
    for test in yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))["tests"]:
        for case in test.get("alert_rule_test", []):
            expectations[case["alertname"]].add(bool(case["exp_alerts"]))
    names = [rule["alert"] for rule in alert_rules()]
    assert len(names) == len(set(names)) >= 8
    missing = {name: {True, False} - expectations[name] for name in names}
    assert not {n: m for n, m in missing.items() if m}, "firing (True) / quiet (False) cases missing"
    assert set(expectations) <= set(names), "a unit test names no rule"


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_every_alert_waits_has_a_severity_and_links_its_runbook_section(rule: dict[str, str]) -> None:
    assert re.fullmatch(r"\d+[smh]", str(rule.get("for", ""))), "needs a for:"
    assert rule["labels"]["severity"] in SEVERITIES
    assert rule["annotations"]["summary"]
    anchor = rule["alert"].lower()
    assert rule["annotations"]["runbook_url"] == f"ops/runbook.md#{anchor}"
    assert anchor in set(headings(RUNBOOK.read_text(encoding="utf-8"))), "no runbook section"


def alerts_table() -> dict[str, tuple[str, str]]:
    """The runbook's "Alerts" table: alert -> (severity, for), each name linked to its section."""
    section = RUNBOOK.read_text(encoding="utf-8").split("\n## Alerts\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| \[(\w+)\]\(#(\w+)\) \| (\w+) \| (\w+) \|", section, re.M)
    assert all(anchor == name.lower() for name, anchor, _, _ in rows)
    return {name: (severity, wait) for name, _, severity, wait in rows}


def test_the_runbook_table_and_the_rules_are_one_list() -> None:
    rules = {rule["alert"]: (rule["labels"]["severity"], rule["for"]) for rule in alert_rules()}
    assert alerts_table() == rules


def test_every_link_inside_the_runbook_reaches_a_heading() -> None:
    text = RUNBOOK.read_text(encoding="utf-8")
    anchors = set(headings(text))
    broken = sorted(set(re.findall(r"\]\(#([^)]+)\)", text)) - anchors)
    assert not broken, f"links to no heading: {broken}"


def test_the_prometheus_configuration_is_valid_and_scrapes_every_job_the_rules_name(
        tmp_path: Path) -> None:
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    assert config["rule_files"] == ["/etc/prometheus/rules/graphrag.yml"]  # docker-compose.yml
    config["rule_files"] = [str(RULES)]
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config), encoding="utf-8")
    done = promtool("check", "config", str(local))
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    assert rule_jobs() <= jobs and {"graphrag-http", "graphrag-worker", "graphrag-cdc"} == jobs
