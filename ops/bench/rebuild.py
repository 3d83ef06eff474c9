"""Rebuild throughput: batched (what the nightly job runs) against the lazy one-at-a-time baseline.

*Batched* is :meth:`worker.compose.Wiring.rebuild`: batches of 100 foci in epochs of
``GRAPHRAG_REBUILD_PAGE`` (500) that share what they loaded, compute, compare-and-set write and
reverse index, over pages of 100 consecutive live ids spread over the table (the nightly paging).
The *baseline* runs the same algorithm and the same writes with one focus per batch and per epoch on
``Doughnut2025(engine, in_chunk=1)``: one note and one relation list per statement, the lazy-ORM
pattern. Both run on the graph's one engine, so :func:`storage.database.counted_statements` counts
exactly the statements of the rebuild being timed. Each strategy is warmed up on a page of its own
first (compiled statement caches). The shared service counts tokens without a memo, so every
figure above is what a process pays the first time it sees the notes; :func:`memo_rebuilds` measures
apart what a worker's token memo (``GRAPHRAG_TOKEN_MEMO_ENTRIES``, on by default) saves when it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphrag import MemoCounter
from ops.bench.full import compare_paths
from ops.bench.graph import Graph, wiring_for
from ops.bench.helpers import figures, lazy_rebuild, ratio, say, worst
from ops.bench.plan import PAGE, STRATEGIES, Bench
from service.context import ContextService
from storage.database import counted_statements
from storage.profiles.doughnut_2025 import Doughnut2025
from worker.settings import Settings

__all__ = ["baseline_rebuild", "memo_rebuilds", "rebuild_section", "timed_rebuild"]


def timed_rebuild(bench: Bench, graph: Graph, ids: Sequence[int], strategy: str,
                  name: str) -> dict[str, Any]:
    """``Wiring.rebuild`` (batches of 100) of ``ids`` under the key prefix ``<base>:<name>``."""
    wiring = wiring_for(bench, graph, name, strategy)
    with counted_statements(graph.engine) as sql:
        report = wiring.rebuild(ids)
    return figures(report, sql, len(ids))


def baseline_rebuild(bench: Bench, graph: Graph, ids: Sequence[int], strategy: str) -> dict[str, Any]:
    """The same algorithm and writes, one focus per batch and one id per ``IN``: the lazy walk."""
    wiring = wiring_for(bench, graph, f"baseline-{strategy}", strategy)
    return lazy_rebuild(wiring, Doughnut2025(graph.engine, in_chunk=1), graph.engine, ids)


def memo_rebuilds(bench: Bench, graph: Graph, foci: Sequence[int]) -> dict[str, Any]:
    """The wavefront rebuild of ``foci`` twice through one token memo: the first pass fills it, the
    second reads every row afresh (a new workspace) and finds every count, as a worker's drain does
    after an edit or its next nightly run."""
    shared, wirings = graph.service, [wiring_for(bench, graph, f"memo-{n}") for n in (1, 2)]
    memo = MemoCounter(shared.counter, Settings.model_fields["token_memo_entries"].default)
    passes = []
    for wiring in wirings:
        wiring.service = ContextService(shared.store, memo, shared.params)
        with counted_statements(graph.engine) as sql:
            passes.append(figures(wiring.rebuild(foci), sql, len(foci))["snapshots_per_s"])
    say(f"rebuild wavefront through a token memo: {passes[0]:.0f} snapshots/s filling it, "
        f"{passes[1]:.0f} snapshots/s once it holds the notes ({memo.entries():,} counts)")
    return {"first_pass_snapshots_per_s": passes[0], "second_pass_snapshots_per_s": passes[1],
            "speedup": ratio(passes[1], passes[0]), "entries": memo.entries()}


def _compare(batched: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    return {"batched": batched, "baseline": baseline,
            "sql_ratio": ratio(baseline["sql_per_snapshot"], batched["sql_per_snapshot"]),
            "throughput_ratio": ratio(batched["snapshots_per_s"], baseline["snapshots_per_s"])}


def _strategy(bench: Bench, graph: Graph, foci: list[int], strategy: str) -> dict[str, Any]:
    timed_rebuild(bench, graph, foci[:PAGE], strategy, f"warmup-{strategy}")
    batched = timed_rebuild(bench, graph, foci, strategy,
                            "main" if strategy == "wavefront" else strategy)
    say(f"rebuild {strategy}: {batched['snapshots_per_s']:.0f} snapshots/s, "
        f"{batched['sql_per_snapshot']:.3f} SQL/snapshot over {len(foci)} notes")
    lazy = baseline_rebuild(bench, graph, foci[: bench.plan.baseline_notes], strategy)
    say(f"baseline {strategy}: {lazy['snapshots_per_s']:.1f} snapshots/s, "
        f"{lazy['sql_per_snapshot']:.1f} SQL/snapshot over {lazy['notes']} notes")
    return _compare(batched, lazy)


def _full(bench: Bench, graph: Graph, strategy: str) -> dict[str, Any]:
    """The full path against the batched path over the same first pieces (ops.bench.full)."""
    return compare_paths(bench, graph.engine, wiring_for(bench, graph, f"paged-{strategy}", strategy),
                         wiring_for(bench, graph, f"full-{strategy}", strategy), strategy)


def rebuild_section(bench: Bench, graph: Graph, foci: list[int]) -> dict[str, Any]:
    """Per strategy, batched against baseline, and the full path against the batched path (the
    tree's strategies of issue 28: wavefront, layered); the top-level keys are wavefront's. The
    wavefront snapshots stay under ``<base>:main`` for the memory, reader and invalidation
    sections."""
    by = {strategy: _strategy(bench, graph, foci, strategy) for strategy in STRATEGIES}
    by["wavefront"]["memo"] = memo_rebuilds(bench, graph, foci)
    full = {strategy: _full(bench, graph, strategy) for strategy in ("wavefront", "layered")}
    main = by["wavefront"]
    return {"full": full, "full_speedup": {s: f["speedup"] for s, f in full.items()},
            "full_rows_per_snapshot_first_pieces": worst([f["rows_per_snapshot"]
                                                          for f in full.values()]),
            "snapshots_per_s": main["batched"]["snapshots_per_s"],
            "sql_per_snapshot": main["batched"]["sql_per_snapshot"],
            "baseline_snapshots_per_s": main["baseline"]["snapshots_per_s"],
            "baseline_sql_per_snapshot": main["baseline"]["sql_per_snapshot"],
            "sql_ratio": main["sql_ratio"], "throughput_ratio": main["throughput_ratio"],
            "notes": len(foci), "baseline_notes": main["baseline"]["notes"], "batch_size": PAGE,
            "by_strategy": by}
