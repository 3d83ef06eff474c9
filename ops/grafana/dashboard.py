"""The service's Grafana dashboard, built with Grafana's typed builder (grafana-foundation-sdk) and
written to ``ops/grafana/dashboards/graphrag.json``, which docker-compose.yml provisions.

Edit this module, never the JSON: ``python -m ops.grafana.dashboard`` writes the file again, and
tests/ops/test_dashboard.py fails while the committed file differs from what this module builds.
Four rows, over the metrics the alert rules use too (ops/prometheus/rules): freshness (change-feed
lag, dirty backlog, edit to fresh), reads (by source, by route and status, by reader kind,
latency quantiles), work (drains, rebuilds, full-rebuild progress) and resources (Redis memory,
processes, dependency errors). Every query names only metrics a running service exports: the
tests scrape ``graphrag serve``, ``graphrag worker`` and ``graphrag cdc`` for each name used here.
Shared-state gauges (backlog, full rebuilds, memory) are reported alike by every worker, so their
queries take the ``max`` over instances; counters are summed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

__all__ = ["DATASOURCE_UID", "OUTPUT", "build", "render"]

#: The uid of the Prometheus data source (ops/grafana/provisioning/datasources/prometheus.yml).
DATASOURCE_UID = "graphrag-prometheus"
OUTPUT = Path(__file__).resolve().parent / "dashboards" / "graphrag.json"
_DATASOURCE = DataSourceRef(type_val="prometheus", uid=DATASOURCE_UID)
_QUANTILES = ((0.5, "p50"), (0.95, "p95"), (0.99, "p99"))


@dataclass(frozen=True)
class Chart:
    """One panel: a time series (or a single value when ``single``) of ``queries``, each a PromQL
    expression and its legend."""

    title: str
    unit: str
    queries: Sequence[tuple[str, str]]
    description: str = ""
    single: bool = False


def quantiles(histogram: str, by: str, window: str = "5m") -> list[tuple[str, str]]:
    """p50, p95 and p99 of ``histogram`` (its ``_bucket`` series summed over instances) by ``by``."""
    return [(f"histogram_quantile({q}, sum by (le, {by}) (rate({histogram}_bucket[{window}])))",
             f"{name} {{{{{by}}}}}") for q, name in _QUANTILES]


def rates(metric: str, by: str = "", legend: str = "", window: str = "5m") -> tuple[str, str]:
    """The per-second rate of a counter summed over instances (by ``by``, when given)."""
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping} (rate({metric}[{window}]))", legend or (f"{{{{{by}}}}}" if by else metric)


FRESHNESS = (
    Chart("Change feed lag", "s", [("max by (instance) (graphrag_cdc_behind_seconds)",
                                    "behind {{instance}}")],
          "How long ago the database was where graphrag cdc has read to (NaN until it caught up)."),
    Chart("Change feed behind", "short", [
        ("max by (instance) (graphrag_cdc_behind_transactions)", "transactions {{instance}}"),
        ("max by (instance) (graphrag_cdc_behind_bytes)", "bytes {{instance}}")]),
    Chart("Readers distrusting the feed", "short", [("sum(graphrag_feed_behind)", "readers")],
          "Readers that answer every read live because the feed is behind its bound.", single=True),
    Chart("Change feed throughput", "ops", [
        rates("graphrag_cdc_transactions_total", legend="transactions"),
        rates("graphrag_cdc_events_total", legend="events")]),
    Chart("Dirty backlog", "short", [("max(graphrag_dirty_backlog)", "foci waiting")],
          "Foci waiting for a rebuild; should return to about 0 within seconds of a burst."),
    Chart("Oldest dirty focus", "s", [("max(graphrag_dirty_oldest_seconds)", "waited")]),
    Chart("Edit to fresh", "s", quantiles("graphrag_edit_fresh_seconds", "lane"),
          "From a focus marked dirty by an edit's event to its snapshot written, by lane."),
    Chart("Edit stages", "s", quantiles("graphrag_edit_stage_seconds", "stage"),
          "Where an edit's time goes, stage by stage: outdate and enqueue where it arrived (the "
          "webhook or change capture), then delivery, resolve, debounce, compute and write in "
          "the workers."),
)
READS = (
    Chart("Reads by source", "reqps", [rates("graphrag_read_seconds_count", "source")]),
    Chart("Cache outcomes", "reqps", [
        rates("graphrag_cache_hits_total", legend="hits"),
        rates("graphrag_cache_stale_total", legend="stale"),
        rates("graphrag_cache_outdated_total", legend="outdated"),
        rates("graphrag_cache_misses_total", legend="misses")]),
    Chart("Share of live answers", "percentunit", [(
        'sum(rate(graphrag_read_seconds_count{source="live"}[5m])) '
        "/ sum(rate(graphrag_read_seconds_count[5m]))", "live")]),
    Chart("HTTP responses by route", "reqps", [rates("graphrag_http_responses_total", "route")]),
    Chart("HTTP responses by status class", "reqps", [(
        'sum by (class) (label_replace(rate(graphrag_http_responses_total[5m]), "class", "${1}xx", '
        '"code", "(.).*"))', "{{class}}")]),
    Chart("Reads by reader kind", "reqps", [
        rates("graphrag_viewer_snapshot_reads_total", legend="other user, from the snapshot"),
        rates("graphrag_viewer_remembered_reads_total", legend="other user, their view kept"),
        rates("graphrag_viewer_live_reads_total", legend="other user, live"),
        rates("graphrag_feed_distrusted_reads_total", legend="feed distrusted, live"),
        rates("graphrag_token_lookups_total", "outcome")]),
    Chart("Read latency", "s", quantiles("graphrag_read_seconds", "source")),
    Chart("Live compute latency", "s", quantiles("graphrag_live_compute_seconds", "job")),
    Chart("Contention", "ops", [
        rates("graphrag_live_computes_total", legend="live computes"),
        rates("graphrag_lock_waits_total", legend="lock waits"),
        rates("graphrag_cas_rejections_total", legend="write-backs refused")]),
)
WORK = (
    Chart("Drains", "ops", [
        rates("graphrag_drain_batches_total", legend="batches"),
        rates("graphrag_drain_requeued_total", legend="foci put back")]),
    Chart("Snapshots rebuilt", "ops", [rates("graphrag_rebuilt_snapshots_total", "path")]),
    Chart("Rebuild errors", "ops", [rates("graphrag_rebuild_errors_total", "path")]),
    Chart("Full rebuild progress", "percentunit", [(
        'max by (run) (graphrag_full_rebuild_notes{state="done"}) '
        '/ max by (run) (graphrag_full_rebuild_notes{state="enqueued"})', "{{run}}")]),
    Chart("Full rebuild notes", "short", [
        ("max by (run, state) (graphrag_full_rebuild_notes)", "{{run}} {{state}}"),
        ("max by (run) (graphrag_full_rebuild_errors)", "{{run}} errors")]),
    Chart("Nightly running for", "s", [(
        'max(graphrag_full_rebuild_running{run="nightly"}) * (time() - '
        'max(graphrag_full_rebuild_started_timestamp_seconds{run="nightly"}))', "running")],
          single=True),
    Chart("Last nightly finished", "s", [(
        'time() - max(graphrag_full_rebuild_finished_timestamp_seconds{run="nightly"})', "ago")],
          single=True),
    Chart("Full rebuilds queued by change capture", "short", [
        ("sum(increase(graphrag_cdc_full_rebuilds_total[1h]))", "last hour")], single=True),
)
RESOURCES = (
    Chart("Cache Redis memory", "bytes", [
        ("max(graphrag_redis_used_memory_bytes)", "used"),
        ("max(graphrag_redis_maxmemory_bytes)", "maxmemory")]),
    Chart("Processes up", "short", [('sum by (job) (up{job=~"graphrag-.*"})', "{{job}}")]),
    Chart("Dependency errors", "ops", [
        rates("graphrag_redis_errors_total", legend="Redis (reads)"),
        rates("graphrag_database_errors_total", legend="database (live computes)"),
        ('sum(rate(graphrag_token_lookups_total{outcome="error"}[5m]))', "database (tokens)"),
        ("1 - min(graphrag_redis_up)", "Redis (worker scrape)")]),
)
ROWS = (("Freshness", FRESHNESS), ("Reads", READS), ("Work", WORK), ("Resources", RESOURCES))


def panel(chart: Chart, panel_id: int) -> timeseries.Panel | stat.Panel:
    """The builder of one chart, its queries lettered A, B, ..."""
    made = stat.Panel() if chart.single else timeseries.Panel()
    made.id(panel_id).title(chart.title).unit(chart.unit).datasource(_DATASOURCE)
    made.height(8).span(12)  # two a line: the builder starts a line once one is 24 wide
    if chart.description:
        made.description(chart.description)
    for letter, (expr, legend) in zip("ABCDEFGH", chart.queries, strict=False):
        made.with_target(prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(letter)
                         .datasource(_DATASOURCE))
    return made


def build() -> dashboard.Dashboard:
    """The dashboard: its rows in order, panel ids numbered from 1 across them."""
    built = (dashboard.Dashboard("Graph RAG snapshots").uid("graphrag-snapshots")
             .tags(["graphrag", "doughnut"]).refresh("30s").time("now-6h", "now")
             .timezone("utc").readonly())
    panel_id = 0
    for title, charts in ROWS:
        panel_id += 1
        built.with_row(dashboard.Row(title).id(panel_id))
        for chart in charts:
            panel_id += 1
            built.with_panel(panel(chart, panel_id))
    return built


def render() -> str:
    """The dashboard's JSON as committed: sorted keys, two-space indents, a final newline."""
    return json.dumps(build().build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    OUTPUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUTPUT}")
