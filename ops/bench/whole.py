"""Whole runs: every live note of a graph rebuilt by the full path and by the batched path.

Rows decoded per snapshot are a property of a run, not of a piece: a piece's foci show notes of
other pieces, and the workspace carried on from piece to piece (service.full_rebuild) has them when
their own piece comes. So the figure of issue 28's target is measured here, over whole runs of the
``plan.whole_size`` graphs of both models (the tree with wavefront, today's Doughnut with
focus-context), not over the first pieces (ops.bench.full):

* *batched*: :meth:`worker.compose.Wiring.rebuild` of every live id in id order (epochs of
  ``GRAPHRAG_REBUILD_PAGE``, the nightly before pieces), after a one-page warm-up;
* *full*: a fresh process (spawned) runs :meth:`worker.compose.Wiring.rebuild_pieces` over every
  piece (``GRAPHRAG_REBUILD_PIECE_NOTES``, the workspace carried as configured) and reports its
  snapshots, seconds, the rows its driver decoded and its peak RSS: what one worker process holds
  at most over a whole run.

Both wirings are built from default settings (a token memo each), each into a key prefix of its
own. ``rows_per_snapshot`` counts every row of every SELECT, note rows and list rows alike.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

from ops.bench.full import spawned_settings
from ops.bench.graph import ensure_database
from ops.bench.plan import PAGE, Bench, figures, peak_rss_kb, ratio, say, worst
from ops.bench.today import ensure_wiki_database
from storage.database import Database, close_engine, counted_statements, open_engine
from storage.profiles import open_source
from worker.compose import Wiring
from worker.settings import load_settings

__all__ = ["whole_section"]


def _wiring(bench: Bench, url: str, schema: str, strategy: str, name: str) -> Wiring:
    settings = load_settings(database_url=url, redis_url=bench.redis_url,
                             redis_prefix=bench.prefix(name), schema_name=schema,
                             strategies=strategy)
    return Wiring(settings, redis_client=bench.client)


def _on(wiring: Wiring) -> Database:
    """A fresh engine ``wiring`` reads through, so its statements alone are counted on it."""
    engine = open_engine(wiring.settings.database_url)
    wiring.source = open_source(engine, wiring.settings.schema_name)
    return engine


def _batched(wiring: Wiring) -> dict[str, Any]:
    engine = _on(wiring)
    ids = wiring.source.live_ids_after(0, wiring.source.count_live() + 1)
    wiring.rebuild(ids[:PAGE])
    with counted_statements(engine) as sql:
        report = wiring.rebuild(ids)
    close_engine(engine)
    out = figures(report, sql, len(ids))
    out["rows_per_snapshot"] = ratio(sql.rows, report.count)
    return out


def _full(wiring: Wiring) -> dict[str, Any]:
    overrides = spawned_settings(wiring.settings, wiring.settings.redis_prefix)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        out: dict[str, Any] = pool.apply(_full_run, (overrides,))
    return out


def _full_run(overrides: dict[str, Any]) -> dict[str, Any]:
    """(In the spawned process.) The full path over every piece: its figures and peak RSS."""
    wiring = Wiring(load_settings(**overrides))
    engine = _on(wiring)
    pieces = [p.ids for p in wiring.source.workspaces(wiring.settings.rebuild_piece_notes)]
    started = time.perf_counter()
    with counted_statements(engine) as sql:
        report = wiring.rebuild_pieces(pieces)
    seconds = time.perf_counter() - started
    return {"notes": sum(map(len, pieces)), "pieces": len(pieces), "snapshots": report.count,
            "seconds": round(seconds, 3), "snapshots_per_s": ratio(report.count, seconds),
            "errors": len(report.errors), "rows_decoded": sql.rows,
            "rows_per_snapshot": ratio(sql.rows, report.count),
            "rows_by_kind": {kind: k.rows for kind, k in sql.by_kind.items() if k.rows},
            "peak_rss_mb": peak_rss_kb() / 1024}


def _model(bench: Bench, url: str, schema: str, strategy: str) -> dict[str, Any]:
    batched = _batched(_wiring(bench, url, schema, strategy, f"whole-batched-{strategy}"))
    full = _full(_wiring(bench, url, schema, strategy, f"whole-full-{strategy}"))
    speedup = ratio(full["snapshots_per_s"], batched["snapshots_per_s"])
    say(f"whole run {strategy}: full path {full['snapshots_per_s']:.0f} snapshots/s over "
        f"{full['notes']:,} notes in {full['pieces']} pieces, batched "
        f"{batched['snapshots_per_s']:.0f} ({speedup:.2f}×); rows decoded per snapshot "
        f"{full['rows_per_snapshot']:.2f} ({batched['rows_per_snapshot']:.2f} batched); "
        f"peak RSS {full['peak_rss_mb']:.0f} MB")
    return {"batched": batched, "full": full, "speedup": speedup,
            "rows_per_snapshot": full["rows_per_snapshot"], "peak_rss_mb": full["peak_rss_mb"]}


def whole_section(bench: Bench) -> dict[str, Any]:
    """Whole runs of both models (module docstring); ``rows_per_snapshot`` is the worst."""
    size = bench.plan.whole_size
    runs = {"wavefront": _model(bench, ensure_database(bench, size), "doughnut-2025", "wavefront"),
            "focus-context": _model(bench, ensure_wiki_database(bench, size), "doughnut-2026",
                                    "focus-context")}
    return {"size": size, "runs": runs,
            "rows_per_snapshot": worst([r["rows_per_snapshot"] for r in runs.values()])}
