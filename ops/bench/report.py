"""The Markdown report of :mod:`ops.bench`, and the files a run leaves.

``write_report(results, samples, out)`` writes ``latest.json``, ``latest.md`` and the plots
``reader_latency.png``, ``live_invalidation_latency.png``, ``throughput.png`` and ``scaling.png``
(plots are skipped, with a notice, when matplotlib is not installed).

The targets a run is held against are :mod:`ops.bench.targets`, the plots :mod:`ops.bench.plots`,
and the sections for today's Doughnut, the RabbitMQ broker and change capture
:mod:`ops.bench.report_today`; this module renders the rest and puts the files together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from ops.bench.plots import PLOTS, write_plots
from ops.bench.report_today import (
    broker_lines,
    cdc_lines,
    cluster_lines,
    full_lines,
    today_lines,
    today_scale_lines,
)
from ops.bench.targets import TARGETS, TOPOLOGIES, Target, finite

__all__ = ["render_markdown", "write_report"]


def fmt(value: Any, unit: str = "") -> str:
    if not finite(value):
        return "n/a"
    v = float(value)
    text = f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return f"{text} {unit}".strip()


def verdict(target: Target, value: float | None) -> tuple[str, str]:
    if value is None or not math.isfinite(value):
        return "n/a", "not measured in this run"
    if target.informational:
        return "for information", "an absolute figure of this machine: not held against the run"
    factor = target.factor(value)
    if target.met(value):
        return "pass", f"{1 / factor:.2f}× headroom" if factor > 0 else "pass"
    if not math.isfinite(factor):
        return "**miss**", f"{value:.3g} where none is allowed"
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
             fmt(x.get("http_hit_p50_us")), fmt(x.get("http_hit_p99_us"))],
            ["HTTP conditional hit answered `304` (same rate, interleaved)",
             fmt(x.get("http_304_p50_us")), fmt(x.get("http_304_p99_us"))]]
    return ["## Reader", "", f"{x['reads']:,} reads over {x['snapshots']:,} snapshots; "
            f"HTTP: {x.get('http_requests', 0):,} requests, achieved "
            f"{fmt(x.get('http_achieved_per_s'))} req/s, {x.get('http_not_cache_hits', 0)} not served "
            f"from the cache, {x.get('http_not_as_expected', 0)} not answered 200 (plain) or 304 "
            "(conditional).", "", *_table(["read", "p50 µs", "p99 µs"], rows),
            *_saturation_lines(x)]


def _saturation_lines(x: dict[str, Any]) -> list[str]:
    if x.get("http_saturation_over_floor") is None:
        return []
    return [f"Saturation (wrk, {x.get('http_saturation_connections')} connections, closed loop, "
            f"random hits): one `graphrag serve` {fmt(x['http_saturation_per_s'])} req/s; the floor "
            f"(a bare ASGI app under the same uvicorn returning the stored values) "
            f"{fmt(x['http_floor_per_s'])} req/s; ratio "
            f"{x['http_saturation_over_floor']:.2f}.", ""]


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
            f"showing the last titles; dirty-set peak {x['burst_dirty_peak']:,}).", "",
            *stage_lines(r)]


def stage_lines(r: dict[str, Any]) -> list[str]:
    """Where an edit's time goes per topology, and its floor (ops.bench.stages)."""
    shown = [(name, r[section]) for section, name in TOPOLOGIES if "stages" in r.get(section, {})]
    if not shown:
        return []
    stages = list(shown[0][1]["stages"])
    rows = [[stage, *(f"{fmt(x['stages'][stage]['p50_ms'])} / {fmt(x['stages'][stage]['p95_ms'])}"
                      for _, x in shown)] for stage in stages]
    rows += [["the commit itself (not counted)",
              *(f"{fmt(x.get('commit_p50_ms'))} / max {fmt(x.get('commit_max_ms'))}"
                for _, x in shown)],
             ["commit → fresh", *(f"{fmt(x['p50_ms'])} / {fmt(x['p95_ms'])}" for _, x in shown)],
             ["floor (rebuild + broker + debounce)",
              *(f"{fmt(x['floor_ms'])} ({fmt(x['floor_rebuild_ms'])} + "
                f"{fmt(x['floor_round_trip_ms'])} + {fmt(x['floor_debounce_ms'])})"
                for _, x in shown)],
             ["p95 / floor", *(fmt(x["p95_over_floor"]) for _, x in shown)],
             ["first edit / floor", *(fmt(x["first_edit_over_floor"]) for _, x in shown)],
             ["first edit / its own floor",
              *(fmt(x.get("first_edit_over_own_floor")) for _, x in shown)],
             ["each edit / its own floor, p95",
              *(fmt(x.get("p95_over_own_floors")) for _, x in shown)]]
    return ["Where a single edit's time goes, p50 / p95 in ms per stage (from the processes' "
            "`graphrag_edit_stage_seconds` buckets; `compute` and `write` per drain batch), and "
            "what it cannot avoid on the same topology (ops/bench/stages.py):", "",
            *_table(["stage", *(name for name, _ in shown)], rows), ""]


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
             fmt(p.get("sql_per_snapshot")), f"{p['sql_share']:.0%}" if finite(p.get("sql_share")) else
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
    return ["## Profile", "", *_split_lines(x.get("split")),
            f"cProfile of a {x['strategy']} rebuild of {x['notes']:,} notes "
            f"({x['seconds']:.1f} s under the profiler). Top functions by cumulative time:", "",
            *_table(head, rows(x["cumulative"])), "By own time:", "", *_table(head, rows(x["own"]))]


def _split_lines(split: dict[str, Any] | None) -> list[str]:
    """The in-place split of a first-sight rebuild (ops.bench.split), when the run has one."""
    if not split:
        return []
    ms = split["ms_per_snapshot"]
    total = sum(ms.values())
    rows = [[part, f"{value:.2f}", f"{value / total:.0%}" if total else "-"]
            for part, value in ms.items()]
    return [f"A {split['strategy']} rebuild of {split['notes']:,} notes timed in place, by part "
            "(sql: batched loads; tokens: the counter, first sight; write: the cache's "
            "write pipeline; rest: the algorithm, rendering, the race check):", "",
            *_table(["part", "ms per snapshot", "share"], [*rows, ["all", f"{total:.2f}", "100%"]])]


def render_markdown(results: dict[str, Any], plots: Sequence[str] = ()) -> str:
    lines = [*_header(results), "## Targets", "", *targets_table(results)]
    for part in (reader_lines, live_lines, rebuild_lines, full_lines, invalidation_lines, broker_lines,
                 cluster_lines, cdc_lines, scale_lines, memory_lines, today_lines, today_scale_lines,
                 scaling_lines, profile_lines):
        lines += part(results)
    if plots:
        lines += ["## Plots", ""] + [f"![{PLOTS[p]}]({p})\n" for p in plots]
    return "\n".join(lines).rstrip() + "\n"


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
