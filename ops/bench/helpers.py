"""The helpers more than one section of the benchmark uses, in one place.

* progress and time: :func:`say` (one stamped line on stderr), :func:`elapsed_s`,
  :func:`wait_for`, :func:`peak_rss_kb`;
* numbers: :func:`percentile`, :func:`ratio`, :func:`worst`, :func:`rounded`. Timings are reported,
  never asserted: ``percentile`` and ``ratio`` return NaN rather than fail on an empty or zero
  sample, ``worst`` is NaN when any part is, and the report shows NaN as "n/a";
* figures: :func:`figures` (one timed rebuild: snapshots/s, SQL per snapshot, by statement kind),
  :func:`latency_figures` (p50, p95, edits, timeouts and samples of one series of edits);
* rebuilds: :func:`lazy_rebuild`, the one-focus-per-batch baseline both models are compared with;
* databases and ports: :func:`loaded_database` (a bench database reused while it matches, else
  loaded), :func:`database_holds` (a check that counts an unreachable server as false),
  :func:`free_port` and :func:`listening`.

Nothing here decides what a figure measures: a section chooses its notes, key prefix, seeds and
sizes and hands them over, so where two sections compute a figure the same way they share the
code that computes it.
"""

from __future__ import annotations

import math
import resource
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from graphrag import GraphRagError
from ops.bench.plan import Bench
from service.carry import Carry
from service.context import ContextService
from service.ports import NoteSource
from service.rebuild import RebuildReport, rebuild
from storage.database import (
    Database,
    StatementTally,
    close_engine,
    counted_statements,
    create_database,
    database_name,
    open_engine,
)
from worker.compose import Wiring, wall_ms

__all__ = [
    "database_holds",
    "elapsed_s",
    "figures",
    "free_port",
    "latency_figures",
    "lazy_rebuild",
    "listening",
    "loaded_database",
    "peak_rss_kb",
    "percentile",
    "ratio",
    "rounded",
    "say",
    "wait_for",
    "worst",
]

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


def latency_figures(latencies: Sequence[float], timeouts: int) -> dict[str, Any]:
    """p50 and p95 (ms) of one series of edits, how many were made, how many timed out, the
    samples (every edit either has a latency or timed out)."""
    return {"p50_ms": percentile(latencies, .5), "p95_ms": percentile(latencies, .95),
            "edits": len(latencies) + timeouts, "timeouts": timeouts, "samples_ms": rounded(latencies)}


def lazy_rebuild(wiring: Wiring, source: NoteSource, engine: Database,
                 ids: Sequence[int]) -> dict[str, Any]:
    """The figures of the baseline: the same algorithm and writes as ``wiring``'s rebuild, one
    focus per batch and per epoch on ``source`` (one id per ``IN``: the lazy walk), nothing carried
    on, its statements counted on ``engine``."""
    source.check()  # its one-time look at the columns, as at a process's start: not counted
    lazy = ContextService(source, wiring.service.counter, wiring.service.params)
    s = wiring.settings
    with counted_statements(engine) as sql:
        report = rebuild(lazy, wiring.cache, ids, strategies=wiring.strategies(), seeds=s.seeds,
                         max_token_limit=s.max_token_limit, layered_limits=s.layered_limits,
                         now_ms=wall_ms(), batch_size=1, epoch_size=1,
                         carry=Carry(max_foci=0))  # the lazy walk: nothing carried on
    return figures(report, sql, len(ids))


def database_holds(url: str, check: Callable[[Database], bool]) -> bool:
    """``check`` on a fresh engine of ``url``; a server or database that cannot answer is False."""
    engine = open_engine(url)
    try:
        return check(engine)
    except GraphRagError:
        return False
    finally:
        close_engine(engine)


def loaded_database(bench: Bench, url: str, size: int, *, matches: Callable[[Database], bool],
                    load: Callable[[Database], dict[str, Any]], what: str = "notes",
                    detail: bool = False) -> str:
    """``url``, (re)created and filled by ``load`` first unless ``matches`` holds for it already;
    ``what`` and ``detail`` (the loader's counts) only shape the progress lines."""
    name = database_name(url) or ""
    if database_holds(url, matches):
        say(f"reusing {name} ({size:,} notes)")
        return url
    say(f"loading {name}: {size:,} {what}, seed {bench.seed} ...")
    create_database(bench.mysql_url, name)
    engine = open_engine(url)
    try:
        counts = load(engine)
    finally:
        close_engine(engine)
    say(f"loaded {name} in {counts['seconds']:.0f} s" + (f": {counts}" if detail else ""))
    return url


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return int(probe_socket.getsockname()[1])


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on ``host:port`` now."""
    with socket.socket() as probe_socket:
        return probe_socket.connect_ex((host, port)) == 0
