"""Where a rebuild's time goes: the wavefront rebuild once more under cProfile.

The top functions by cumulative and by own time, named by their path in the repository (or in
site-packages); the benchmark's own frames and the profiler's are left out. Then the same rebuild
of every rebuild focus timed in place by part, without the profiler (ops.bench.split).
"""

from __future__ import annotations

import cProfile
import pstats
from typing import Any

from ops.bench.graph import Graph
from ops.bench.helpers import say
from ops.bench.plan import ROOT, Bench
from ops.bench.rebuild import timed_rebuild
from ops.bench.split import split_rebuild

__all__ = ["profile_section", "top_functions"]


def _label(func: tuple[str, int, str]) -> str:
    filename, line, name = func
    if filename == "~":
        return name
    if "site-packages/" in filename:
        path = filename.split("site-packages/", 1)[1]
    else:
        path = filename.removeprefix(f"{ROOT}/")
    return f"{path}:{line}({name})"


def top_functions(stats: pstats.Stats, key: str, count: int) -> list[dict[str, Any]]:
    """The first ``count`` functions by ``key`` (``cumulative``, ``tottime``), without our own."""
    stats.sort_stats(key)
    rows: list[dict[str, Any]] = []
    for where in stats.fcn_list:  # type: ignore[attr-defined]
        _, calls, own, cumulative, _ = stats.stats[where]  # type: ignore[attr-defined]
        name = _label(where)
        if name.startswith("ops/bench") or "_lsprof.Profiler" in name:
            continue
        rows.append({"function": name, "calls": calls, "own_s": round(own, 4),
                     "cumulative_s": round(cumulative, 4)})
        if len(rows) == count:
            break
    return rows


def profile_section(bench: Bench, graph: Graph, foci: list[int]) -> dict[str, Any]:
    ids = foci[: bench.plan.profile_notes]
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        figures = timed_rebuild(bench, graph, ids, "wavefront", "profile")
    finally:
        profiler.disable()
    stats = pstats.Stats(profiler)
    say(f"profiled a wavefront rebuild of {len(ids)} notes ({figures['seconds']:.1f} s under cProfile)")
    return {"strategy": "wavefront", "notes": len(ids), "seconds": figures["seconds"],
            "cumulative": top_functions(stats, "cumulative", 15),
            "own": top_functions(stats, "tottime", 10), "split": split_rebuild(bench, graph, foci)}
