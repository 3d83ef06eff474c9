"""Today's Doughnut at size (the full run): cost per snapshot 10k → 1M, and the nightly at 1M notes.

* *scaling*: as the tree's scaling section (ops.bench.scaling) on ``graphrag_bench_2026_<size>``:
  the batched focus-context rebuild of ``scaling_notes`` foci in pages spread over the table, after a
  one-page warm-up; flat means max/min ms per snapshot <= 1.5;
* *nightly*: the full-rebuild path (service.full_rebuild) on the largest of those graphs with 1 and
  then 2 worker processes, each a fresh spawned process taking the database's pieces
  (:meth:`service.ports.NoteSource.workspaces`, ``GRAPHRAG_REBUILD_PIECE_NOTES``) from one shared
  queue, as the nightly's tasks do. Its wall time, snapshots and every process's peak RSS.
  ``nightly_notes`` caps the notes taken (0: all of them): a 1M-note site's snapshots take about
  14 GB of Redis per 500k notes, and a 2-core machine rebuilds them in hours. The wall time for
  every live note is then the measured one times live notes ÷ notes taken, reported as
  ``wall_s_all_estimated``: the pieces are of one size and in the database's order, so the rate
  holds, but it is an estimate, and says so.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from typing import Any

from ops.bench.full import first_pieces, spawned_settings
from ops.bench.graph import pages
from ops.bench.helpers import peak_rss_kb, ratio, say
from ops.bench.plan import Bench, BenchError
from ops.bench.today import today_wiring, warmed_rebuild, wiki_database
from worker.compose import Wiring
from worker.settings import load_settings

__all__ = ["today_scaling_section"]

def today_scaling_section(bench: Bench) -> dict[str, Any]:
    """Both parts (module docstring); empty in the quick run, which measures one size."""
    sizes = bench.plan.scaling_sizes
    if not sizes:
        return {}
    points = [_scaling_point(bench, size) for size in sizes]
    return {"scaling": points, "nightly": _nightly(bench, max(sizes))}


def _scaling_point(bench: Bench, size: int) -> dict[str, Any]:
    with wiki_database(bench, size) as (url, engine):
        wiring = today_wiring(bench, url, engine, f"today-scale-{size}")
        foci = pages(wiring.source.live_ids_after(0, size + 1), bench.plan.scaling_notes)
        first = warmed_rebuild(wiring, engine, foci)
    say(f"today's Doughnut at {size:,} notes: {first['ms_per_snapshot']:.2f} ms/snapshot, "
        f"SQL {first['sql_share']:.0%} of the time")
    return {"notes": size, "ms_per_snapshot": first["ms_per_snapshot"],
            "sql_per_snapshot": first["sql_per_snapshot"], "sql_share": first["sql_share"],
            "snapshots": first["snapshots"]}


def _nightly(bench: Bench, size: int) -> dict[str, Any]:
    with wiki_database(bench, size) as (url, engine):
        wiring = today_wiring(bench, url, engine, "today-nightly")
        live = wiring.source.count_live()
        want = bench.plan.nightly_notes or live
        pieces = [p.ids for p in first_pieces(wiring.source, wiring.settings.rebuild_piece_notes,
                                               want)]
    runs = {str(n): _processes(bench, wiring, pieces, n, live) for n in (1, 2)}
    one, two = runs["1"], runs["2"]
    return {"notes": size, "live": live, "pieces": len(pieces), "by_processes": runs,
            "speedup_2_vs_1": ratio(one["wall_s"], two["wall_s"])}


def _processes(bench: Bench, wiring: Wiring, pieces: list[list[int]], processes: int,
               live: int) -> dict[str, Any]:
    """The pieces rebuilt by ``processes`` fresh processes sharing one queue of pieces."""
    overrides = spawned_settings(wiring.settings, bench.prefix(f"today-nightly-{processes}"))
    context = multiprocessing.get_context("spawn")
    todo, done = context.Queue(), context.Queue()
    for piece in pieces:
        todo.put(piece)
    workers = [context.Process(target=_worker, args=(overrides, todo, done))
               for _ in range(processes)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    reports = _reports(workers, done)
    wall = time.perf_counter() - started
    for worker in workers:
        worker.join()
    notes = sum(len(p) for p in pieces)
    out = {"processes": processes, "notes": notes, "wall_s": round(wall, 1),
           "snapshots": sum(r["snapshots"] for r in reports),
           "errors": sum(r["errors"] for r in reports),
           "peak_rss_mb": [round(r["peak_kb"] / 1024) for r in reports],
           "wall_s_all_estimated": round(wall * live / max(1, notes))}
    say(f"today's nightly, {processes} process(es): {notes:,} notes in {len(pieces)} pieces, "
        f"{out['snapshots']:,} snapshots in {wall:.0f} s ({ratio(out['snapshots'], wall):.0f}/s); "
        f"peak RSS {out['peak_rss_mb']} MB; all {live:,} notes ≈ {out['wall_s_all_estimated']:,} s")
    return out


def _reports(workers: list[Any], done: Any) -> list[dict[str, Any]]:
    """Each process's report; a process that ended without one stops the run."""
    reports: list[dict[str, Any]] = []
    while len(reports) < len(workers):
        try:
            reports.append(done.get(timeout=5.0))
        except queue.Empty:
            if not any(w.is_alive() for w in workers) and done.empty():
                codes = [w.exitcode for w in workers]
                raise BenchError(f"a nightly rebuild process ended without a report (exit codes "
                                 f"{codes})") from None
    return reports


def _worker(overrides: dict[str, Any], todo: Any, done: Any) -> None:
    """(In a spawned process.) Rebuild pieces from ``todo`` until it is empty; report on ``done``."""
    wiring = Wiring(load_settings(**overrides))
    carry, snapshots, errors = wiring.piece_carry(), 0, 0  # (as a worker process carries it)
    while True:
        try:
            piece = todo.get(timeout=1.0)
        except queue.Empty:
            break
        report = wiring.rebuild_pieces([piece], carry=carry)
        snapshots, errors = snapshots + report.count, errors + len(report.errors)
    done.put({"snapshots": snapshots, "errors": errors,
              "peak_kb": peak_rss_kb()})
