"""The Grafana dashboard is generated, never hand-edited, and wired to what Compose provisions.

ops/grafana/dashboard.py builds it with Grafana's typed builder; the committed JSON must be exactly
what it builds now (``python -m ops.grafana.dashboard`` writes it again). Every query names the
provisioned Prometheus data source, and the provisioning files point at the paths docker-compose.yml
mounts them to. Whether each metric it names is exported, and each query valid PromQL, is checked
against running processes and a real Prometheus (test_monitoring_live.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ops.grafana.dashboard import DATASOURCE_UID, OUTPUT, ROWS, render
from tests.ops.monitoring import DASHBOARD, dashboard_exprs, metric_names

PROVISIONING = DASHBOARD.parents[1] / "provisioning"


def test_the_committed_dashboard_is_what_the_builder_makes() -> None:
    assert OUTPUT == DASHBOARD
    assert DASHBOARD.read_text(encoding="utf-8") == render(), (
        "ops/grafana/dashboards/graphrag.json differs from ops/grafana/dashboard.py: run "
        "`python -m ops.grafana.dashboard` and commit the file")


def test_it_has_the_four_rows_and_every_query_names_the_provisioned_source() -> None:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    rows = [panel["title"] for panel in board["panels"] if panel["type"] == "row"]
    assert rows == [title for title, _ in ROWS] == ["Freshness", "Reads", "Work", "Resources"]
    sources = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    assert [s["uid"] for s in sources["datasources"]] == [DATASOURCE_UID]
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            assert target["datasource"] == {"type": "prometheus", "uid": DATASOURCE_UID}
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))


def test_it_shows_what_the_issue_asks_for() -> None:
    names = metric_names(dashboard_exprs())
    for wanted in ("graphrag_cdc_behind_seconds", "graphrag_cdc_behind_bytes",
                   "graphrag_cdc_behind_transactions", "graphrag_dirty_backlog",
                   "graphrag_edit_fresh_seconds_bucket", "graphrag_read_seconds_bucket",
                   "graphrag_read_seconds_count", "graphrag_http_responses_total",
                   "graphrag_viewer_live_reads_total", "graphrag_drain_batches_total",
                   "graphrag_rebuilt_snapshots_total", "graphrag_full_rebuild_notes",
                   "graphrag_redis_used_memory_bytes", "graphrag_token_lookups_total"):
        assert wanted in names, wanted


def compose_target(compose: dict[str, Any], service: str, config: str) -> str:
    """Where ``docker-compose.yml`` mounts the top-level config ``config`` into ``service``."""
    mounts = {m["source"]: m["target"] for m in compose["services"][service]["configs"]}
    return str(mounts[config])


def test_the_provisioning_files_name_the_paths_compose_mounts(compose: dict[str, Any]) -> None:
    providers = yaml.safe_load((PROVISIONING / "dashboards" / "graphrag.yml").read_text())
    folder = providers["providers"][0]["options"]["path"]
    target = compose_target(compose, "grafana", "grafana-dashboard")
    assert Path(target).parent == Path(folder) and Path(target).name == DASHBOARD.name
    home = compose["services"]["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == target
    sources = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    assert sources["datasources"][0]["url"] == "http://prometheus:9090"
