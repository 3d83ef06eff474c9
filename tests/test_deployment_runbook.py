"""``ops/runbook.md``, held to the deployment it documents.

The runbook must cover the operations the deployment issue names and explain every metric the
service exports; the ``graphrag`` commands it shows must exist in the CLI, and the Compose files it
offers (a worker host on a Redis Cluster, a realtime/bulk split) must agree with
``docker-compose.yml``.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from service.metrics import (
    CdcMetrics,
    ReaderMetrics,
    WorkMetrics,
    http_responses,
    session_lookups,
    token_lookups,
)
from service.state_metrics import MemoryUse, StateCollector
from storage.memory import MemoryDirtySet
from tests.deployment_support import ROOT, argv, environment, option

RUNBOOK = ROOT / "ops" / "runbook.md"


# --- ops/runbook.md -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runbook() -> str:
    return RUNBOOK.read_text(encoding="utf-8")


@pytest.mark.parametrize("phrase", [
    "## Deploy", "docker compose up", "graphrag rebuild --all --queue", "graphrag rebuild --status",
    "## Scale workers", "--scale worker=", "--concurrency", "realtime", "bulk",
    "## Rotate the webhook secret", "GRAPHRAG_WEBHOOK_SECRET", "webhook-signature",
    "## Rotate the reader token", "GRAPHRAG_READER_TOKEN",
    "## Read metrics", "/metrics",
    "## Recover from a Redis flush", "redis-cache", "redis-broker", "RedBeat",
    "GRANT SELECT ON doughnut.note TO 'graphrag'@'%'",
    "graphrag audit --sample 500", "README.md",
])
def test_runbook_covers_the_operations(runbook: str, phrase: str) -> None:
    assert phrase in runbook


def runbook_yaml(marker: str) -> str:
    """The one YAML block of the runbook that contains ``marker``."""
    blocks = re.findall(r"```yaml\n(.*?)```", RUNBOOK.read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"expected one YAML block with {marker!r} in the runbook"
    return textwrap.dedent(found[0])


def runbook_override_text() -> str:
    """The override file the runbook offers for splitting realtime and bulk workers."""
    return runbook_yaml("worker-bulk:")


def test_runbook_worker_host_file_runs_the_compose_worker_on_a_cluster(
        compose: dict[str, Any]) -> None:
    host = yaml.safe_load(runbook_yaml("docker-compose.worker.yml"))["services"]["worker"]
    worker = compose["services"]["worker"]
    assert host["command"] == worker["command"] and host["image"] == worker["image"]
    assert host["healthcheck"]["test"] == worker["healthcheck"]["test"]
    assert set(environment(worker)) < set(environment(host))
    assert environment(host)["GRAPHRAG_REDIS_CLUSTER"] == "true"


def test_runbook_queue_split_keeps_both_queues_and_the_configuration(compose: dict[str, Any]) -> None:
    override = yaml.safe_load(runbook_override_text())["services"]
    queues = set()
    for name in ("worker", "worker-bulk"):
        queues |= set((option(argv(override[name]["command"]), "--queues") or "").split(","))
    assert queues == {"realtime", "bulk"}
    bulk = override["worker-bulk"]
    assert environment(bulk) == environment(compose["services"]["worker"])
    assert bulk["build"] == compose["services"]["worker"]["build"]
    assert bulk["image"] == compose["services"]["worker"]["image"]
    assert bulk["healthcheck"]["test"] == compose["services"]["worker"]["healthcheck"]["test"]
    assert all(spec["condition"] == "service_healthy" for spec in bulk["depends_on"].values())


def test_runbook_names_every_exported_metric(runbook: str) -> None:
    """The reader's, the workers' (their counts and the state gauges) and change capture's."""
    registry = CollectorRegistry()
    for create in (ReaderMetrics.create, WorkMetrics.create, CdcMetrics.create, http_responses,
                   token_lookups, session_lookups):
        create(registry)
    registry.register(StateCollector(MemoryDirtySet(), {}, lambda: MemoryUse(0, 0), lambda: 0))
    names = set()
    for family in registry.collect():
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    assert len(names) >= 30
    missing = sorted(n for n in names if f"`{n}" not in runbook)
    assert not missing, f"ops/runbook.md does not explain {missing}"


def test_runbook_commands_exist_in_the_cli(runbook: str) -> None:
    from click.testing import CliRunner

    from worker.cli.main import main

    for command in sorted(set(re.findall(r"graphrag ([a-z]+)", runbook))):
        result = CliRunner().invoke(main, [command, "--help"])
        assert result.exit_code == 0, f"`graphrag {command}` is not a command"
    for flag in ("--queue", "--status", "--all"):
        assert flag in CliRunner().invoke(main, ["rebuild", "--help"]).output
    assert "--sample" in CliRunner().invoke(main, ["audit", "--help"]).output
