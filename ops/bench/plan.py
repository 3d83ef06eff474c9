"""What one benchmark run measures (:class:`Plan`), its context (:class:`Bench`) and small helpers.

A run owns everything it creates: its Redis keys live under ``graphrag-bench:<run>`` (``Bench.base``;
each section takes a sub-prefix of its own, so sections never read each other's snapshots unless
they mean to), its databases are the disposable ``graphrag_bench_<size>``, and the titles it edits
are restored. Timings are reported, never asserted: ``percentile`` and ``ratio`` return NaN rather
than fail on an empty or zero sample, and the report shows NaN as "n/a".
"""

from __future__ import annotations

import math
import resource
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.rebuild import RebuildReport
from storage.database import StatementTally, with_database
from worker.settings import Settings, load_settings

__all__ = [
    "EDIT_MARK",
    "FULL",
    "MAX_TOKEN_LIMIT",
    "PAGE",
    "QUICK",
    "ROOT",
    "STRATEGIES",
    "WARMUP_EDITS",
    "Bench",
    "BenchError",
    "Plan",
    "elapsed_s",
    "figures",
    "peak_rss_kb",
    "percentile",
    "ratio",
    "rounded",
    "say",
    "size_name",
    "wait_for",
    "worst",
]

#: the repository: subprocesses start here, profiles name files relative to it
ROOT = Path(__file__).resolve().parents[2]
STRATEGIES = ("wavefront", "layered")
MAX_TOKEN_LIMIT = 5000
#: titles the invalidation section writes start with this (a database holding one is reloaded)
EDIT_MARK = "bench-edit"
#: foci per page: the nightly rebuild's paging, and the batch size of a batched rebuild
PAGE = 100
#: the first single edits, while the worker processes build their runtime, are reported apart
WARMUP_EDITS = 4


class BenchError(Exception):
    """The benchmark cannot go on (a service missing, a subprocess that did not start, ...)."""


@dataclass(frozen=True)
class Plan:
    """How much of everything one run measures."""

    main_size: int = 100_000
    scaling_sizes: tuple[int, ...] = ()
    rebuild_notes: int = 2_000
    baseline_notes: int = 100
    reads: int = 20_000
    http_rate: int = 300
    http_seconds: float = 5.0
    live_notes: int = 200
    profile_notes: int = 500
    edits: int = 30
    edit_timeout_s: float = 15.0
    burst_notes: int = 200
    burst_edits: int = 1_000
    burst_timeout_s: float = 60.0
    scaling_notes: int = 2_000
    drain_notes: int = 4_000
    #: live notes of the first pieces both rebuild paths compute side by side (ops.bench.full)
    full_notes: int = 4_000
    #: the notes of the graphs of both models rebuilt whole by both paths (ops.bench.whole)
    whole_size: int = 10_000
    #: notes of the largest 2026 graph the nightly section rebuilds with 1 and 2 processes (0: all;
    #: ops.bench.today_scale); the quick run measures no such size
    nightly_notes: int = 0


QUICK = Plan()
FULL = Plan(scaling_sizes=(10_000, 100_000, 1_000_000), rebuild_notes=5_000, baseline_notes=300,
            reads=50_000, http_seconds=10.0, live_notes=500, profile_notes=2_000, edits=60,
            burst_timeout_s=300.0, drain_notes=10_000, full_notes=10_000,
            nightly_notes=50_000)

_STARTED = time.perf_counter()


def say(text: str) -> None:
    """One progress line on stderr, stamped with the seconds since the run started."""
    print(f"[bench {time.perf_counter() - _STARTED:6.1f}s] {text}", file=sys.stderr, flush=True)


def elapsed_s() -> float:
    return time.perf_counter() - _STARTED


def peak_rss_kb() -> int:
    """This process's own peak RSS in KB: ``VmHWM`` of its address space. (``getrusage``'s
    ``ru_maxrss`` would not do for a spawned child: Linux carries the parent's high-water mark
    over fork and exec, so the child would report at least the bench process's size.)"""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def worst(values: Sequence[float | None]) -> float:
    """The largest measured value (NaN when any is NaN or none was measured: never a figure that
    hides an unmeasured part)."""
    measured = [v for v in values if v is not None]
    return max(measured) if measured and not any(math.isnan(v) for v in measured) else math.nan


def ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def rounded(values: Sequence[float]) -> list[float]:
    return [round(v, 1) for v in values]


def wait_for(check: Callable[[], bool], timeout_s: float, interval_s: float = 0.005) -> bool:
    """Poll ``check`` until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.perf_counter() + timeout_s
    while not check():
        if time.perf_counter() > deadline:
            return False
        time.sleep(interval_s)
    return True


def size_name(size: int) -> str:
    """``100k``, ``1m``, ``2500``: the suffix of a bench database's name."""
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}m"
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


@dataclass
class Bench:
    """One run: options, its Redis client (opaque: only :mod:`storage.redis` calls it) and key
    prefix, samples for the plots."""

    plan: Plan
    mysql_url: str
    redis_url: str
    client: Any
    seed: int = 0
    amqp_url: str = "amqp://guest:guest@127.0.0.1:5672"
    #: the snapshots in a Redis Cluster (``redis_url`` names a node); the broker on ``broker_redis_url``
    redis_cluster: bool = False
    broker_redis_url: str | None = None
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    samples: dict[str, list[float]] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"graphrag-bench:{self.run}"

    def prefix(self, name: str) -> str:
        """The key prefix of one section's snapshots."""
        return f"{self.base}:{name}"

    def db_url(self, size: int) -> str:
        return with_database(self.mysql_url, f"graphrag_bench_{size_name(size)}")

    def settings(self, size: int, name: str, strategy: str = "wavefront") -> Settings:
        """Settings of a process keeping ``strategy`` snapshots under :meth:`prefix` ``(name)``."""
        return load_settings(database_url=self.db_url(size), redis_url=self.redis_url,
                             redis_cluster=self.redis_cluster, redis_prefix=self.prefix(name),
                             strategies=strategy,
                             max_token_limit=MAX_TOKEN_LIMIT)


def figures(report: RebuildReport, sql: StatementTally, notes: int) -> dict[str, Any]:
    """The JSON figures of one timed rebuild of ``notes`` foci."""
    if report.errors:
        say(f"  {len(report.errors)} errors, e.g. {next(iter(report.errors.items()))}")
    by_kind = {kind: {"statements": k.statements, "seconds": k.seconds}
               for kind, k in sql.by_kind.items() if k.statements}
    return {"notes": notes, "snapshots": report.count, "seconds": round(report.seconds, 3),
            "snapshots_per_s": ratio(report.count, report.seconds),
            "ms_per_snapshot": ratio(report.seconds * 1000, report.count),
            "sql_statements": sql.statements,
            "sql_per_snapshot": ratio(sql.statements, report.count),
            "sql_seconds": sql.seconds, "sql_share": ratio(sql.seconds, report.seconds),
            "sql_by_kind": by_kind, "errors": len(report.errors)}
