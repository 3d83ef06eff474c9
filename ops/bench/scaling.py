"""Cost per snapshot against graph size: the batched wavefront rebuild at 10k, 100k and 1M notes.

Each size rebuilds ``scaling_notes`` foci in pages spread over its table twice: a first pass (what
a nightly rebuild meets) and a second over the same ids (warm caches), after a one-page warm-up.
Flat means max/min ms per snapshot <= 1.5 (the report's target). The quick run measures one size
and reports the main rebuild's figure for it.
"""

from __future__ import annotations

from typing import Any

from ops.bench.graph import Graph, open_graph, pages, table_mb
from ops.bench.helpers import say
from ops.bench.plan import PAGE, Bench
from ops.bench.rebuild import timed_rebuild
from storage.database import close_engine

__all__ = ["scaling_point", "scaling_section"]


def scaling_point(bench: Bench, graph: Graph) -> dict[str, Any]:
    """A first pass (what a nightly rebuild meets) and a second pass over the same ids (warm caches)."""
    ids, size = pages(graph.ids, bench.plan.scaling_notes), graph.size
    timed_rebuild(bench, graph, ids[:PAGE], "wavefront", f"warmup-scale-{size}")
    first = timed_rebuild(bench, graph, ids, "wavefront", f"scale-{size}")
    second = timed_rebuild(bench, graph, ids, "wavefront", f"scale-{size}-again")
    say(f"scaling {size:,} notes: {first['ms_per_snapshot']:.2f} ms/snapshot "
        f"(second pass {second['ms_per_snapshot']:.2f}), SQL {first['sql_share']:.0%} of the time")
    return {"notes": size, "ms_per_snapshot": first["ms_per_snapshot"],
            "second_pass_ms_per_snapshot": second["ms_per_snapshot"],
            "sql_per_snapshot": first["sql_per_snapshot"], "sql_share": first["sql_share"],
            "sql_by_kind": first["sql_by_kind"], "snapshots": first["snapshots"],
            "table_mb": round(table_mb(graph), 1)}


def scaling_section(bench: Bench, main: Graph, main_rebuild: dict[str, Any]) -> list[dict[str, Any]]:
    """ms per snapshot (wavefront, batches of 100) at each size; the quick run reports its one size."""
    if not bench.plan.scaling_sizes:
        return [{"notes": main.size, "ms_per_snapshot": main_rebuild["ms_per_snapshot"],
                 "sql_per_snapshot": main_rebuild["sql_per_snapshot"],
                 "sql_share": main_rebuild["sql_share"], "table_mb": round(table_mb(main), 1)}]
    points = []
    for size in bench.plan.scaling_sizes:
        graph = main if size == main.size else open_graph(bench, size)
        try:
            points.append(scaling_point(bench, graph))
        finally:
            if graph is not main:
                close_engine(graph.engine)
    return points
