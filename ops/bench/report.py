"""The Markdown report and PNG plots of :mod:`ops.bench` (matplotlib, Agg backend).

``write_report(results, samples, out)`` writes ``latest.json``, ``latest.md`` and the plots
``reader_latency.png``, ``live_invalidation_latency.png``, ``throughput.png`` and ``scaling.png``
(plots are skipped, with a notice, when matplotlib is not installed).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ops.bench.report_today import broker_lines, cdc_lines, cluster_lines, today_lines

__all__ = ["TARGETS", "Target", "render_markdown", "write_report"]

KB = 1024


@dataclass(frozen=True)
class Target:
    """One target of issue 5: ``value(results) <op> bound``."""

    label: str
    key: str
    op: str  # "<=", "<" or ">="
    bound: float
    unit: str
    value: Callable[[dict[str, Any]], float | None]

    def met(self, value: float) -> bool:
        if self.op == ">=":
            return value >= self.bound
        return value < self.bound if self.op == "<" else value <= self.bound

    def factor(self, value: float) -> float:
        """How far off (> 1 misses by that factor) or how much headroom (< 1)."""
        return self.bound / value if self.op == ">=" else value / self.bound


def at(path: str) -> Callable[[dict[str, Any]], float | None]:
    def get(results: dict[str, Any]) -> float | None:
        node: Any = results
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return float(node) if isinstance(node, int | float) else None

    return get


def scaling_spread(results: dict[str, Any]) -> float | None:
    """max / min ms per snapshot over the sizes measured; None below two sizes."""
    ms = [p["ms_per_snapshot"] for p in results.get("scaling", []) if _finite(p["ms_per_snapshot"])]
    return max(ms) / min(ms) if len(ms) >= 2 and min(ms) > 0 else None


def _per_strategy(strategy: str) -> Callable[[dict[str, Any]], float | None]:
    return at(f"rebuild.by_strategy.{strategy}.batched.snapshots_per_s")


TARGETS = (
    Target("reader hit p50 / raw GET p50", "reader.ratio_p50", "<=", 1.3, "×", at("reader.ratio_p50")),
    Target("reader hit p99", "reader.hit_p99_us", "<", 1000, "µs", at("reader.hit_p99_us")),
    Target("cache hit speed-up over live compute", "live.speedup_hit_vs_live", ">=", 100, "×",
           at("live.speedup_hit_vs_live")),
    Target("rebuild throughput, wavefront (one process)", "rebuild.snapshots_per_s", ">=", 1000,
           "snapshots/s", at("rebuild.snapshots_per_s")),
    Target("rebuild throughput, layered (one process)",
           "rebuild.by_strategy.layered.batched.snapshots_per_s", ">=", 500, "snapshots/s",
           _per_strategy("layered")),
    Target("SQL statements per snapshot", "rebuild.sql_per_snapshot", "<=", 0.5, "",
           at("rebuild.sql_per_snapshot")),
    Target("fewer SQL statements than the baseline", "rebuild.sql_ratio", ">=", 50, "×",
           at("rebuild.sql_ratio")),
    Target("single-edit invalidation p95", "invalidation.p95_ms", "<=", 250, "ms",
           at("invalidation.p95_ms")),
    Target("1,000-edit burst settled", "invalidation.burst_1000_s", "<=", 3, "s",
           at("invalidation.burst_1000_s")),
    Target("single-edit invalidation p95, RabbitMQ broker", "invalidation_rabbitmq.p95_ms", "<=", 250,
           "ms", at("invalidation_rabbitmq.p95_ms")),
    Target("single-edit invalidation p95, Redis Cluster", "invalidation_cluster.p95_ms", "<=", 250,
           "ms", at("invalidation_cluster.p95_ms")),
    Target("drain speed-up, 2 worker processes over 1", "scale.drain_speedup_2_vs_1", ">=", 1.7, "×",
           at("scale.drain_speedup_2_vs_1")),
    Target("Redis bytes per snapshot (tokenLimit 5000)", "memory.bytes_per_snapshot", "<=", 24 * KB,
           "B", at("memory.bytes_per_snapshot")),
    Target("flat cost per snapshot 10k → 1M (max/min ms)", "scaling", "<=", 1.5, "×", scaling_spread),
)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def fmt(value: Any, unit: str = "") -> str:
    if not _finite(value):
        return "n/a"
    v = float(value)
    text = f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return f"{text} {unit}".strip()


def verdict(target: Target, value: float | None) -> tuple[str, str]:
    if value is None or not math.isfinite(value):
        return "n/a", "not measured in this run"
    factor = target.factor(value)
    if target.met(value):
        return "pass", f"{1 / factor:.2f}× headroom" if factor > 0 else "pass"
    return "**miss**", f"off by {factor:.2f}×" if factor < 10 else f"off by {factor:.0f}×"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [_row(head), _row(["---"] * len(head)), *(_row(r) for r in rows), ""]


def targets_table(results: dict[str, Any]) -> list[str]:
    rows = []
    for t in TARGETS:
        value = t.value(results)
        status, margin = verdict(t, value)
        rows.append([t.label, f"`{t.key}`", fmt(value, t.unit), f"{t.op} {fmt(t.bound, t.unit)}",
                     status, margin])
    return _table(["figure", "key", "measured", "target", "result", "by how much"], rows)


def _header(r: dict[str, Any]) -> list[str]:
    m, g = r["machine"], r["graph"]
    return [
        f"# Benchmark report ({r['mode']} run {r['run']})", "",
        f"Started {r['started_at']}, took {r['seconds']:.0f} s. Machine: {m['cores']} cores "
        f"({m['cpu']}), load average at start {m['load_average']}, Python {m['python']}, "
        f"MariaDB {m['mariadb']} (InnoDB buffer pool {m['innodb_buffer_pool_mb']:,} MB), "
        f"Redis {m['redis']}.", "",
        f"Graph `{g['database']}` ({fmt(g['table_mb'])} MB): {g['notes']:,} notes "
        f"({g['live']:,} live, {g['links']:,} links, "
        f"{g['deleted']:,} soft-deleted, {g['notebooks']:,} notebooks), largest fan-out "
        f"{g['max_children']:,} children, largest hub {g['max_inbound']:,} inbound references.", "",
        "Timings come from a shared machine and are noisy; they are never pass/fail tests.", "",
    ]


def reader_lines(r: dict[str, Any]) -> list[str]:
    x = r["reader"]
    rows = [["`SnapshotReader.get` hit (in process)", fmt(x["hit_p50_us"]), fmt(x["hit_p99_us"])],
            ["raw redis-py GET + orjson.loads", fmt(x["raw_get_p50_us"]), fmt(x["raw_get_p99_us"])],
            [f"HTTP hit at {x.get('http_rate_per_s', 'n/a')} req/s (`graphrag serve`, loopback)",
             fmt(x.get("http_hit_p50_us")), fmt(x.get("http_hit_p99_us"))]]
    return ["## Reader", "", f"{x['reads']:,} reads over {x['snapshots']:,} snapshots; "
            f"HTTP: {x.get('http_requests', 0):,} requests, achieved "
            f"{fmt(x.get('http_achieved_per_s'))} req/s, {x.get('http_not_cache_hits', 0)} not served "
            "from the cache.", "", *_table(["read", "p50 µs", "p99 µs"], rows)]


def live_lines(r: dict[str, Any]) -> list[str]:
    x = r["live"]
    rows = [[s, fmt(v["p50_ms"]), fmt(v["p95_ms"]), fmt(v["p99_ms"])]
            for s, v in x["by_strategy"].items()]
    return ["## Live compute", "", f"One `ContextService.compute` per focus, {x['notes']} random live "
            f"notes, tokenLimit 5000. Cache-hit speed-up (wavefront live p50 / hit p50): "
            f"{fmt(x['speedup_hit_vs_live'])}×.", "",
            *_table(["strategy", "p50 ms", "p95 ms", "p99 ms"], rows)]


def rebuild_lines(r: dict[str, Any]) -> list[str]:
    x = r["rebuild"]
    rows = []
    for strategy, v in x["by_strategy"].items():
        b, lazy = v["batched"], v["baseline"]
        rows.append([strategy, fmt(b["snapshots_per_s"]), fmt(b["sql_per_snapshot"]),
                     fmt(lazy["snapshots_per_s"]), fmt(lazy["sql_per_snapshot"]),
                     f"{fmt(v['throughput_ratio'])}×", f"{fmt(v['sql_ratio'])}×"])
    return ["## Rebuild", "", f"Batched: `Wiring.rebuild` in batches of {x['batch_size']} over "
            f"{x['notes']:,} notes (pages of 100 consecutive live ids spread over the table). Baseline: "
            "the same algorithm one focus per batch and one id per `IN` "
            f"(`Doughnut2025(engine, in_chunk=1)`), {x['baseline_notes']} notes. Layered stores two "
            "snapshots per note (tokenLimits 2500, 5000).", "",
            *_table(["strategy", "snapshots/s", "SQL/snapshot", "baseline snapshots/s",
                     "baseline SQL/snapshot", "throughput ratio", "SQL ratio"], rows),
            *memo_lines(x["by_strategy"]["wavefront"].get("memo")), *sql_lines(x["by_strategy"])]


def memo_lines(m: dict[str, Any] | None) -> list[str]:
    """The wavefront rebuild again through a worker's token memo (absent in older reports)."""
    return [] if m is None else [
        "", f"Through a worker's token memo (wavefront, rows read afresh each pass): "
        f"{fmt(m['first_pass_snapshots_per_s'])} snapshots/s filling it, "
        f"{fmt(m['second_pass_snapshots_per_s'])} once it holds the notes' counts "
        f"({fmt(m['speedup'])}×, {m['entries']:,} counts).", ""]


def sql_lines(by: dict[str, Any]) -> list[str]:
    """Where the batched rebuild's database time goes, per statement kind."""
    rows = []
    for strategy, v in by.items():
        b = v["batched"]
        for kind, k in sorted(b["sql_by_kind"].items(), key=lambda kv: -kv[1]["seconds"]):
            rows.append([strategy, f"`{kind}`", f"{k['statements']:,}", fmt(k["seconds"]),
                         f"{k['seconds'] / b['seconds']:.0%}"])
    return ["Database time of the batched rebuilds by statement (time in `execute`, rows included):",
            "", *_table(["strategy", "statement", "count", "seconds", "share of the rebuild"], rows)]


def invalidation_lines(r: dict[str, Any]) -> list[str]:
    x = r.get("invalidation")
    if not x:
        return []
    return ["## Invalidation", "",
            f"Real Celery worker (`-Q realtime,bulk --concurrency 2`) and `graphrag serve`. Single "
            f"edits: {x['edits']} title edits, each a signed webhook; time until a snapshot showing "
            f"the note (through the reverse index) has the new title: p50 {fmt(x['p50_ms'])} ms, "
            f"p95 {fmt(x['p95_ms'])} ms, max {fmt(x['max_ms'])} ms, {x['timeouts']} timeouts; the "
            f"first {len(x['warmup_ms'])} edits (worker processes warming up) apart: "
            f"{', '.join(fmt(v) for v in x['warmup_ms'])} ms.", "", *_reader_seen(x),
            f"Burst: {x['burst_edits']:,} edits over {x['burst_notes']} notes in {x['burst_webhooks']} "
            f"webhooks: {'settled' if x['burst_settled'] else 'not settled'} after "
            f"{fmt(x['burst_1000_s'])} s (dirty set empty, broker idle, a sample of 20 snapshots "
            f"showing the last titles; dirty-set peak {x['burst_dirty_peak']:,}).", ""]


def _reader_seen(x: dict[str, Any]) -> list[str]:
    if "reader_p95_ms" not in x:
        return []
    return [f"The same for {x['reader_edits']} other edits, but until `graphrag serve` answers a read "
            f"with the new title (the webhook outdates the snapshots showing the note before it "
            f"answers, and the reader computes an outdated snapshot instead of serving it): p50 "
            f"{fmt(x['reader_p50_ms'])} ms, p95 {fmt(x['reader_p95_ms'])} ms, "
            f"{x['reader_timeouts']} timeouts.", ""]


def scale_lines(r: dict[str, Any]) -> list[str]:
    x = r.get("scale")
    if not x:
        return []
    rows = [[str(run["processes"]), f"{run['foci']:,}", fmt(run["seconds"]), fmt(run["snapshots_per_s"])]
            for run in x["runs"]]
    return ["## Scale-out", "", f"Real Celery workers draining the dirty set ({x['dirty_shards']} "
            f"shards): speed-up of two processes over one {fmt(x['drain_speedup_2_vs_1'])}×.", "",
            *_table(["processes", "foci", "seconds", "snapshots/s"], rows)]


def memory_lines(r: dict[str, Any]) -> list[str]:
    x = r["memory"]
    rows = [[k, f"{v['keys']:,}", f"{v['bytes']:,}"] for k, v in x["by_kind"].items()]
    return ["## Memory", "", f"{x['snapshots']:,} wavefront snapshots: {fmt(x['bytes_per_snapshot'])} "
            f"B each (layered: {fmt(x['by_strategy']['layered'])} B), "
            f"{fmt(x['all_bytes_per_snapshot'])} B with the index and counters; the reverse index "
            f"(`dep:*`) is {x['dep_index_share'] * 100:.1f}% of snap + dep + shows + gen.", "",
            *_table(["kind", "keys", "bytes (MEMORY USAGE)"], rows)]


def scaling_lines(r: dict[str, Any]) -> list[str]:
    rows = [[f"{p['notes']:,}", fmt(p["ms_per_snapshot"]), fmt(p.get("second_pass_ms_per_snapshot")),
             fmt(p.get("sql_per_snapshot")), f"{p['sql_share']:.0%}" if _finite(p.get("sql_share")) else
             "n/a", fmt(p.get("table_mb"))] for p in r["scaling"]]
    note = "" if r["mode"] == "full" else " (quick run: the 100k rebuild only)"
    return [f"## Scaling{note}", "", "Wavefront, batches of 100, 2,000 notes in pages spread over the "
            "table; the second pass rebuilds the same notes again (warm caches). Compare the table "
            f"size with the InnoDB buffer pool ({r['machine']['innodb_buffer_pool_mb']:,} MB).", "",
            *_table(["notes", "ms per snapshot", "second pass", "SQL/snapshot", "SQL share of time",
                     "table MB"], rows)]


def profile_lines(r: dict[str, Any]) -> list[str]:
    x = r["profile"]

    def rows(entries: list[dict[str, Any]]) -> list[list[str]]:
        return [[f"`{e['function']}`", f"{e['calls']:,}", f"{e['own_s']:.3f}",
                 f"{e['cumulative_s']:.3f}"] for e in entries]

    head = ["function", "calls", "own s", "cumulative s"]
    return ["## Profile", "", f"cProfile of a {x['strategy']} rebuild of {x['notes']:,} notes "
            f"({x['seconds']:.1f} s under the profiler). Top functions by cumulative time:", "",
            *_table(head, rows(x["cumulative"])), "By own time:", "", *_table(head, rows(x["own"]))]


PLOTS = {"reader_latency.png": "Reader latency (CDF)",
         "live_invalidation_latency.png": "Live compute and invalidation latency (CDF)",
         "throughput.png": "Rebuild throughput and SQL per snapshot",
         "scaling.png": "Cost per snapshot against graph size"}


def render_markdown(results: dict[str, Any], plots: Sequence[str] = ()) -> str:
    lines = [*_header(results), "## Targets", "", *targets_table(results)]
    for part in (reader_lines, live_lines, rebuild_lines, invalidation_lines, broker_lines,
                 cluster_lines, cdc_lines, scale_lines, memory_lines, today_lines, scaling_lines,
                 profile_lines):
        lines += part(results)
    if plots:
        lines += ["## Plots", ""] + [f"![{PLOTS[p]}]({p})\n" for p in plots]
    return "\n".join(lines).rstrip() + "\n"


# -- plots ----------------------------------------------------------------------------------------
def _cdf(ax: Any, values: Sequence[float], label: str) -> None:
    if values:
        ordered = sorted(values)
        ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=label)


def plot_reader(plt: Any, samples: dict[str, list[float]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, label in (("raw_us", "raw GET + orjson.loads"), ("hit_us", "SnapshotReader.get hit"),
                       ("http_us", "HTTP hit (loopback)")):
        _cdf(ax, samples.get(key, []), label)
    ax.set(xscale="log", xlabel="latency (µs, log)", ylabel="fraction of reads", title=PLOTS[path.name])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_live(plt: Any, samples: dict[str, list[float]], path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for key in sorted(k for k in samples if k.startswith("live_")):
        _cdf(left, samples[key], key.removeprefix("live_").removesuffix("_ms"))
    left.set(xscale="log", xlabel="live compute (ms, log)", ylabel="fraction", title="live compute")
    _cdf(right, samples.get("invalidation_ms", []), "webhook → fresh snapshot")
    right.axvline(500, color="red", linestyle="--", label="p95 target 500 ms")
    right.set(xlabel="ms", title="single-edit invalidation")
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_throughput(plt: Any, results: dict[str, Any], path: Path) -> None:
    by = results["rebuild"]["by_strategy"]
    names = list(by)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, title in ((left, "snapshots_per_s", "snapshots/s (one process)"),
                           (right, "sql_per_snapshot", "SQL statements per snapshot")):
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], [by[n]["batched"][key] for n in names], 0.4, label="batched")
        ax.bar([x + 0.2 for x in xs], [by[n]["baseline"][key] for n in names], 0.4, label="baseline")
        ax.set_xticks(list(xs), names)
        ax.set(yscale="log", title=title)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend()
    left.axhline(1000, color="red", linestyle="--")
    right.axhline(0.5, color="red", linestyle="--")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_scaling(plt: Any, results: dict[str, Any], path: Path) -> None:
    points = sorted(results["scaling"], key=lambda p: p["notes"])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p["notes"] for p in points], [p["ms_per_snapshot"] for p in points], marker="o",
            label="first pass")
    again = [p for p in points if _finite(p.get("second_pass_ms_per_snapshot"))]
    if again:
        ax.plot([p["notes"] for p in again], [p["second_pass_ms_per_snapshot"] for p in again],
                marker="s", linestyle="--", label="second pass (warm)")
        ax.legend()
    ax.set(xscale="log", xlabel="notes in the database (log)", ylabel="ms per snapshot",
           title=PLOTS[path.name], ylim=(0, None))
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(results: dict[str, Any], samples: dict[str, list[float]], out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("notice: matplotlib is not installed; no plots", file=sys.stderr)
        return []
    plot_reader(plt, samples, out / "reader_latency.png")
    plot_live(plt, samples, out / "live_invalidation_latency.png")
    plot_throughput(plt, results, out / "throughput.png")
    plot_scaling(plt, results, out / "scaling.png")
    return list(PLOTS)


def _clean(value: Any) -> Any:
    """NaN/inf become null (JSON has neither); floats keep 4 significant decimals."""
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_report(results: dict[str, Any], samples: dict[str, list[float]], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "latest.json", out / "latest.md"
    options = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
    json_path.write_bytes(orjson.dumps(_clean(results), option=options) + b"\n")
    plots = write_plots(results, samples, out)
    md_path.write_text(render_markdown(results, plots), encoding="utf-8")
    return [json_path, md_path, *(out / p for p in plots)]
