"""Live compute latency: one :meth:`service.context.ContextService.compute` per focus, per strategy.

Random live notes (seeded), tokenLimit 5000, no batching and no cache: what a reader pays on a miss.
Each call opens its own batch on the shared engine, as a miss does.
"""

from __future__ import annotations

import random
import time
from typing import Any

from graphrag import Request
from ops.bench.graph import Graph
from ops.bench.helpers import percentile, say
from ops.bench.plan import MAX_TOKEN_LIMIT, STRATEGIES, Bench
from service.context import ContextService
from worker.compose import wall_ms

__all__ = ["live_section"]


def _time_live(service: ContextService, focus: int, strategy: str) -> float:
    request = Request(focus, 0, MAX_TOKEN_LIMIT, wall_ms(), traversal_token_limit=MAX_TOKEN_LIMIT)
    started = time.perf_counter()
    service.compute(request, strategy)
    return (time.perf_counter() - started) * 1000


def live_section(bench: Bench, graph: Graph) -> dict[str, Any]:
    """p50/p95/p99/mean ms per strategy; the top-level keys are wavefront's."""
    foci = random.Random(bench.seed + 1).sample(graph.ids, min(bench.plan.live_notes, len(graph.ids)))
    by: dict[str, Any] = {}
    for strategy in STRATEGIES:
        ms = [_time_live(graph.service, f, strategy) for f in foci]
        bench.samples[f"live_{strategy}_ms"] = ms
        by[strategy] = {"p50_ms": percentile(ms, .5), "p95_ms": percentile(ms, .95),
                        "p99_ms": percentile(ms, .99), "mean_ms": sum(ms) / len(ms)}
        say(f"live {strategy}: p50 {by[strategy]['p50_ms']:.1f} ms, p95 {by[strategy]['p95_ms']:.1f} ms")
    return {"p50_ms": by["wavefront"]["p50_ms"], "p95_ms": by["wavefront"]["p95_ms"],
            "notes": len(foci), "by_strategy": by}
