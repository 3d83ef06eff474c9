"""Change capture next to webhooks: commit → fresh snapshot, and the log reader's sustained rate.

On a private MariaDB with a binary log (:mod:`ops.bench.binlog`) the section loads a generated 2025
graph of ``CDC_NOTES`` notes, rebuilds wavefront snapshots of a sample of foci under a prefix of its
own and starts a Celery worker and ``graphrag serve`` (:func:`ops.bench.services.services`). Then:

1. **Webhook path**: title edits one after another, each committed and posted as a signed webhook;
   the time from the commit until the watching focus's snapshot shows the new title.
2. **Change-capture path**: ``graphrag cdc`` started, the same kind of edits committed with no
   webhook; the same clock. Then the same again with an MCP client subscribed to the watched foci's
   contexts, timed until its ``notifications/resources/updated`` arrives (:mod:`ops.bench.notify`).
3. **Sustained rate**: with ``graphrag cdc`` stopped, ``CDC_BURST`` single-row transactions are
   committed; then it is started again and timed until it has stored the server's final log position
   (every transaction read, its events enqueued): the transactions per second of backlog it works
   off, which bounds the edit rate it keeps up with.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from ops.bench.binlog import private_binlog_server
from ops.bench.graph import Graph, open_graph, pages, wiring_for
from ops.bench.helpers import free_port, latency_figures, rounded, say, wait_for
from ops.bench.invalidation import edit_floor, edit_latencies, edit_pairs, quiet, set_titles
from ops.bench.notify import notification_latencies
from ops.bench.plan import EDIT_MARK, WARMUP_EDITS, Bench, BenchError
from ops.bench.services import process_group, services
from ops.bench.stages import slowest_edits, stage_watch, typical_first
from storage.binlog import current_position
from storage.database import close_engine
from storage.redis import probe
from storage.redis.keys import Keys
from storage.redis.positions import RedisPositions

__all__ = ["cdc_section"]

CDC_NOTES, CDC_FOCI, CDC_BURST = 10_000, 400, 2_000


def _cdc_command(metrics_port: int | None = None) -> list[str]:
    port = [] if metrics_port is None else ["--metrics-port", str(metrics_port)]
    return [sys.executable, "-c", "from worker.cli.main import main; main()", "cdc", *port]


def _follows(log: Path) -> bool:
    return "following the log" in log.read_text(errors="replace")


def _commit_burst(bench: Bench, graph: Graph, notes: list[int]) -> float:
    """``CDC_BURST`` single-row transactions, one after another; the seconds they took."""
    started = time.perf_counter()
    for i in range(CDC_BURST):
        set_titles(graph, {notes[i % len(notes)]: f"{EDIT_MARK} {bench.run} r{i}"})
    return time.perf_counter() - started


def _catch_up(graph: Graph, positions: RedisPositions, committed_s: float) -> dict[str, Any]:
    """Seconds until the restarted ``graphrag cdc`` has stored the server's final position."""
    final = current_position(graph.url).to_text()
    started = time.perf_counter()
    if not wait_for(lambda: positions.get() == final, 300, 0.02):
        raise BenchError("graphrag cdc did not catch up with the server's log within 300 s")
    seconds = time.perf_counter() - started
    say(f"change capture caught up with {CDC_BURST} transactions in {seconds:.1f} s "
        f"({CDC_BURST / seconds:.0f}/s; committing them took {committed_s:.1f} s)")
    return {"burst_transactions": CDC_BURST, "burst_s": seconds, "commit_s": committed_s,
            "transactions_per_s": CDC_BURST / seconds}


def cdc_section(bench: Bench) -> dict[str, Any]:
    """The figures of the module docstring; the private server and every key are gone after."""
    with private_binlog_server() as root:
        side = dataclasses.replace(bench, mysql_url=root, run=f"{bench.run}-cdc", samples={})
        graph = open_graph(side, CDC_NOTES)
        try:
            return _measure(side, graph)
        finally:
            close_engine(graph.engine)
            probe.unlink_prefix(bench.client, side.base)


def _measure(bench: Bench, graph: Graph) -> dict[str, Any]:
    foci = pages(graph.ids, CDC_FOCI)
    report = wiring_for(bench, graph, "main").rebuild(foci)
    say(f"change capture: {report.count} snapshots of {len(foci)} foci on the private server")
    edits = WARMUP_EDITS + bench.plan.edits
    pairs = edit_pairs(bench, graph, foci, 3 * edits)
    positions = RedisPositions(bench.client, Keys(bench.prefix("main")))
    with services(bench, graph) as svc, httpx.Client(base_url=svc.base_url, timeout=10) as http, \
            tempfile.TemporaryDirectory(prefix="graphrag-bench-cdc-") as tmp:
        edit_latencies(bench, graph, svc, pairs[:WARMUP_EDITS], http, "hw")
        webhook = latency_figures(*edit_latencies(bench, graph, svc, pairs[WARMUP_EDITS:edits], http,
                                                  "h"))
        pairs[edits:2 * edits] = typical_first(wiring_for(bench, graph, "main"),
                                               pairs[edits:2 * edits], edits)
        log, port = Path(tmp) / "cdc.log", free_port()
        with process_group(_cdc_command(port), svc.env, log, partial(_follows, log), "graphrag cdc"):
            cold, _ = edit_latencies(bench, graph, svc, pairs[edits:edits + WARMUP_EDITS], http,
                                     "cw", webhook=False)
            measured = pairs[edits + WARMUP_EDITS:2 * edits]
            with stage_watch([svc.worker_metrics_url, f"http://127.0.0.1:{port}/metrics"]) as watch:
                cdc = latency_figures(*edit_latencies(bench, graph, svc, measured, http, "c",
                                                      webhook=False))
                quiet(svc, wiring_for(bench, graph, "main"))
            cdc |= {"warmup_ms": rounded(cold)}
            if not cdc["timeouts"]:
                cdc["slowest_edits"] = slowest_edits(wiring_for(bench, graph, "main"),
                                                     pairs[edits + WARMUP_EDITS - 1:2 * edits],
                                                     cdc["samples_ms"])
            cdc |= edit_floor(bench, graph, svc, [e for e, _ in measured], cdc, watch.figures(),
                              first_edited=pairs[edits][0])
            notified = notification_latencies(bench, graph, svc, pairs[2 * edits:],
                                              Path(tmp) / "mcp.log")
        committed_s = _commit_burst(bench, graph, [p[0] for p in pairs])  # while cdc is stopped
        again = Path(tmp) / "cdc-again.log"
        with process_group(_cdc_command(), svc.env, again, partial(_follows, again), "graphrag cdc"):
            rate = _catch_up(graph, positions, committed_s)
    say(f"commit → fresh: webhook p50 {webhook['p50_ms']:.0f} / p95 {webhook['p95_ms']:.0f} ms, "
        f"change capture p50 {cdc['p50_ms']:.0f} / p95 {cdc['p95_ms']:.0f} ms, "
        f"MCP notification p50 {notified['p50_ms']:.0f} / p95 {notified['p95_ms']:.0f} ms")
    return {"notes": CDC_NOTES, "webhook": webhook, "cdc": cdc, **rate, "mcp_notification": notified,
            "notification_p50_ms": notified["p50_ms"], "notification_p95_ms": notified["p95_ms"],
            "fresh_p50_ms": cdc["p50_ms"], "fresh_p95_ms": cdc["p95_ms"]}
