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
own. ``rows_per_snapshot`` counts note rows, the rows that carry a note's fields
(storage.database.NOTE_TEXT_LABELS): the issue's "note rows decoded"; ``all_rows_per_snapshot``
counts every row of every SELECT, id lists and folder, notebook and access rows too.
"""

from __future__ import annotations

from typing import Any

from ops.bench.full import own_engine, spawned_full_run, spawned_settings, timed_run
from ops.bench.graph import ensure_database
from ops.bench.helpers import ratio, say, worst
from ops.bench.plan import PAGE, Bench
from ops.bench.today import ensure_wiki_database
from storage.database import close_engine
from worker.compose import Wiring
from worker.settings import load_settings

__all__ = ["whole_section"]


def _wiring(bench: Bench, url: str, schema: str, strategy: str, name: str) -> Wiring:
    settings = load_settings(database_url=url, redis_url=bench.redis_url,
                             redis_prefix=bench.prefix(name), schema_name=schema,
                             strategies=strategy)
    return Wiring(settings, redis_client=bench.client)


def _batched(wiring: Wiring) -> dict[str, Any]:
    engine = own_engine(wiring)
    ids = wiring.source.live_ids_after(0, wiring.source.count_live() + 1)
    wiring.rebuild(ids[:PAGE])
    out = timed_run(engine, lambda: wiring.rebuild(ids), len(ids))
    close_engine(engine)
    return out


def _full(wiring: Wiring) -> dict[str, Any]:
    return spawned_full_run(spawned_settings(wiring.settings, wiring.settings.redis_prefix))


def _model(bench: Bench, url: str, schema: str, strategy: str) -> dict[str, Any]:
    batched = _batched(_wiring(bench, url, schema, strategy, f"whole-batched-{strategy}"))
    full = _full(_wiring(bench, url, schema, strategy, f"whole-full-{strategy}"))
    speedup = ratio(full["snapshots_per_s"], batched["snapshots_per_s"])
    say(f"whole run {strategy}: full path {full['snapshots_per_s']:.0f} snapshots/s over "
        f"{full['notes']:,} notes in {full['pieces']} pieces, batched "
        f"{batched['snapshots_per_s']:.0f} ({speedup:.2f}×); note rows decoded per snapshot "
        f"{full['note_rows_per_snapshot']:.2f} ({batched['note_rows_per_snapshot']:.2f} batched; "
        f"all rows {full['all_rows_per_snapshot']:.2f}); peak RSS {full['peak_rss_mb']:.0f} MB")
    return {"batched": batched, "full": full, "speedup": speedup,
            "rows_per_snapshot": full["note_rows_per_snapshot"],
            "all_rows_per_snapshot": full["all_rows_per_snapshot"],
            "peak_rss_mb": full["peak_rss_mb"]}


def whole_section(bench: Bench) -> dict[str, Any]:
    """Whole runs of both models (module docstring); ``rows_per_snapshot`` is the worst."""
    size = bench.plan.whole_size
    runs = {"wavefront": _model(bench, ensure_database(bench, size), "doughnut-2025", "wavefront"),
            "focus-context": _model(bench, ensure_wiki_database(bench, size), "doughnut-2026",
                                    "focus-context")}
    return {"size": size, "runs": runs,
            "rows_per_snapshot": worst([r["rows_per_snapshot"] for r in runs.values()])}
