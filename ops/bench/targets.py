"""The targets of issue 5 that the benchmark report holds a run against, and how a figure is read
out of the results (the keys of ``latest.json``).

A target is ``value(results) <op> bound``, named in the report by its key. A figure the run did not
measure (``--only``, a quick run, an older ``latest.json``) reads as None instead of raising, so a
report renders from any results and says "n/a" for it, as for any value that is not :func:`finite`
(NaN and infinities neither pass nor miss). Timings are compared, never asserted: the machine is
shared and noisy. :func:`finite` is the one test of a measured number that the report's tables and
the plots share.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["TARGETS", "TOPOLOGIES", "Target", "at", "finite", "scaling_spread", "today_scaling_spread"]

KB = 1024
#: the sections of an edit's path per topology (ops.bench.stages), as the report names them
TOPOLOGIES = (("invalidation", "single Redis"), ("invalidation_cdc", "change capture"),
              ("invalidation_cluster", "Redis Cluster"), ("invalidation_rabbitmq", "RabbitMQ"))


@dataclass(frozen=True)
class Target:
    """One target of issue 5: ``value(results) <op> bound``."""

    label: str
    key: str
    op: str  # "<=", "<" or ">="
    bound: float
    unit: str
    value: Callable[[dict[str, Any]], float | None]
    #: shown next to its old bound but never held against a run: an absolute figure that depends
    #: on the machine (issue 28 replaced them with ratios measured side by side in one run)
    informational: bool = False

    def met(self, value: float) -> bool:
        if self.op == ">=":
            return value >= self.bound
        return value < self.bound if self.op == "<" else value <= self.bound

    def factor(self, value: float) -> float:
        """How far off (> 1 misses by that factor) or how much headroom (< 1); against a bound of
        0 (none allowed), 0 when met and infinite when not."""
        if self.bound == 0 or (self.op == ">=" and value == 0):
            return 0.0 if self.met(value) else math.inf
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
    return _spread(results.get("scaling", []))


def today_scaling_spread(results: dict[str, Any]) -> float | None:
    """As :func:`scaling_spread`, on today's Doughnut (the full run's ``today_scale``)."""
    return _spread(results.get("today_scale", {}).get("scaling", []))


def _spread(points: list[dict[str, Any]]) -> float | None:
    ms = [p["ms_per_snapshot"] for p in points if finite(p["ms_per_snapshot"])]
    return max(ms) / min(ms) if len(ms) >= 2 and min(ms) > 0 else None


def _per_strategy(strategy: str) -> Callable[[dict[str, Any]], float | None]:
    return at(f"rebuild.by_strategy.{strategy}.batched.snapshots_per_s")


TARGETS = (
    Target("reader hit p50 / raw GET p50", "reader.ratio_p50", "<=", 1.3, "×", at("reader.ratio_p50")),
    Target("reader hit p99", "reader.hit_p99_us", "<", 1000, "µs", at("reader.hit_p99_us")),
    Target("reader hit p50 with the change-feed bound / without", "reader.feed_bound_ratio_p50",
           "<=", 1.1, "×", at("reader.feed_bound_ratio_p50")),
    Target("cache hit speed-up over live compute", "live.speedup_hit_vs_live", ">=", 100, "×",
           at("live.speedup_hit_vs_live")),
    Target("rebuild throughput, wavefront (one process)", "rebuild.snapshots_per_s", ">=", 1000,
           "snapshots/s", at("rebuild.snapshots_per_s"), informational=True),
    Target("rebuild throughput, layered (one process)",
           "rebuild.by_strategy.layered.batched.snapshots_per_s", ">=", 500, "snapshots/s",
           _per_strategy("layered"), informational=True),
    *(Target(f"full-rebuild path ÷ batched path, {s} (snapshots/s)", f"rebuild.full_speedup.{s}",
             ">=", 3, "×", at(f"rebuild.full_speedup.{s}"))
      for s in ("wavefront", "layered", "focus-context")),
    Target("note rows decoded per snapshot written, full path", "rebuild.full_rows_per_snapshot",
           "<=", 1.2, "", at("rebuild.full_rows_per_snapshot")),
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
    *(Target(f"single-edit p95 / its floor, {name}", f"{section}.p95_over_floor", "<=", 2, "×",
             at(f"{section}.p95_over_floor")) for section, name in TOPOLOGIES),
    *(Target(f"first edit after a start / its floor, {name}", f"{section}.first_edit_over_floor",
             "<=", 2, "×", at(f"{section}.first_edit_over_floor")) for section, name in TOPOLOGIES),
    Target("commit → MCP notification p95 (change capture)", "cdc.notification_p95_ms", "<", 1000, "ms",
           at("cdc.notification_p95_ms")),
    Target("drain speed-up, 2 worker processes over 1", "scale.drain_speedup_2_vs_1", ">=", 1.7, "×",
           at("scale.drain_speedup_2_vs_1"), informational=True),
    Target("Redis bytes per snapshot (tokenLimit 5000)", "memory.bytes_per_snapshot", "<=", 24 * KB,
           "B", at("memory.bytes_per_snapshot")),
    Target("Redis bytes per focus-context snapshot, trace included",
           "memory.focus_context_bytes_per_snapshot", "<=", 12 * KB, "B",
           at("memory.focus_context_bytes_per_snapshot")),
    Target("focus-context hit p50 at the default tokenLimit / bare GET + decode",
           "today.reads.hit_ratio_p50", "<=", 1.3, "×", at("today.reads.hit_ratio_p50")),
    Target("focus-context hit p50 at another tokenLimit / at the default",
           "today.reads.other_limit_ratio_p50", "<=", 1.3, "×", at("today.reads.other_limit_ratio_p50")),
    *(Target(f"Doughnut's read p50, {kind} / the owner's at the default tokenLimit",
             f"doughnut_reads.{kind}.ratio_p50", "<=", 1.3, "×", at(f"doughnut_reads.{kind}.ratio_p50"))
      for kind in ("owner_any", "subscriber", "circle", "bazaar_anonymous")),
    *(Target(f"Doughnut's read p50 over HTTP at 300 req/s, {kind} / the owner's at the default",
             f"doughnut_reads.{kind}.http.ratio_p50", "<=", 1.3, "×",
             at(f"doughnut_reads.{kind}.http.ratio_p50"))
      for kind in ("owner_any", "subscriber", "circle", "bazaar_anonymous")),
    *(Target(f"SQL statements per Doughnut read over HTTP after warm-up, {kind}",
             f"doughnut_reads.{kind}.http.sql_per_read", "<=", 0, "",
             at(f"doughnut_reads.{kind}.http.sql_per_read"))
      for kind in ("owner_default", "owner_any", "subscriber", "circle", "bazaar_anonymous")),
    Target("hits/s of one graphrag serve over the floor (a bare ASGI app, same server and values)",
           "reader.http_saturation_over_floor", ">=", 0.5, "×",
           at("reader.http_saturation_over_floor")),
    Target("SQL statements per Doughnut read after warm-up, all kinds", "doughnut_reads.sql_per_read",
           "<=", 0, "", at("doughnut_reads.sql_per_read")),
    Target("flat cost per snapshot 10k → 1M (max/min ms)", "scaling", "<=", 1.5, "×", scaling_spread),
    Target("flat cost per snapshot 10k → 1M, today's Doughnut (max/min ms)", "today_scale.scaling",
           "<=", 1.5, "×", today_scaling_spread),
)


def finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
