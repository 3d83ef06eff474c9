"""The full-rebuild path against the batched path: the same notes, side by side in one run.

For each graph (the 100k tree for wavefront and layered, today's 100k wiki for focus-context), each
into a key prefix of its own:

* *batched*: what the nightly run did before pieces, :meth:`worker.compose.Wiring.rebuild` of
  ``plan.full_notes`` consecutive live ids from the middle of the table (epochs of
  ``GRAPHRAG_REBUILD_PAGE`` with batches of 100 and a carried workspace);
* *same notes*: the same batched path over exactly the notes of the pieces below, in id order;
* *full*: :meth:`worker.compose.Wiring.rebuild_pieces` of the first notebooks' pieces
  (:meth:`service.ports.NoteSource.workspaces`, cut at ``GRAPHRAG_REBUILD_PIECE_NOTES``), taken
  until they hold at least ``plan.full_notes`` live notes (service.full_rebuild);
* *warm*: the full path once more over the same pieces, carrying on the workspace the *full* run
  filled (the edit ``seq`` stood still): no SQL, every row decoded, every note costed and every
  fragment rendered already. What remains is what every path pays per snapshot (the strategy's own
  work and the write), so ``speedup_warm`` (warm ÷ batched) is the most any way of loading and
  costing could give the nightly over the batched path in this run.

The full path writes the bytes the batched path writes for the same notes
(tests/usecases/test_full_rebuild.py); ``speedup`` is full ÷ batched in snapshots/s (the nightly's
change), ``speedup_same_notes`` full ÷ same notes (what loading a piece at once adds to the
order of pieces). The remembered cuts of related notes (graphrag.wiki.focus.walk.related_body) are
forgotten before each, so neither finds the other's work. ``rows_per_snapshot`` is the note rows the
driver decoded (rows carrying a note's fields: storage.database.NOTE_TEXT_LABELS) ÷ snapshots
written; ``all_rows_per_snapshot`` counts every row of each SELECT, id lists included. Last, a
fresh process (spawned) runs the full path over the same pieces and reports its peak RSS: what one
worker process holds at most while it rebuilds a piece at a time.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from typing import Any

from graphrag.wiki.focus.walk import forget_related_bodies
from ops.bench.helpers import figures, peak_rss_kb, ratio, say
from ops.bench.plan import Bench
from service.ports import NoteSource, Piece
from storage.database import Database, StatementTally, counted_statements, open_engine
from storage.profiles import open_source
from worker.compose import Wiring
from worker.settings import Settings, load_settings

__all__ = ["compare_paths", "decoded", "first_pieces", "own_engine", "spawned_full_run",
           "spawned_settings", "timed_run"]


def first_pieces(source: NoteSource, max_notes: int, want: int) -> list[Piece]:
    """The first pieces until they hold at least ``want`` notes."""
    chosen: list[Piece] = []
    stream: Iterator[Piece] = source.workspaces(max_notes)
    while sum(len(p.ids) for p in chosen) < want and (piece := next(stream, None)) is not None:
        chosen.append(piece)
    return chosen


def timed_run(engine: Database, run: Any, notes: int) -> dict[str, Any]:
    """The figures of ``run()`` rebuilding ``notes`` foci, rows decoded per snapshot included
    (the remembered cuts of related notes forgotten first)."""
    forget_related_bodies()
    with counted_statements(engine) as sql:
        report = run()
    return figures(report, sql, notes) | decoded(sql, report.count)


def _by_kind(sql: StatementTally) -> dict[str, Any]:
    return {"rows_by_kind": {kind: k.rows for kind, k in sql.by_kind.items() if k.rows},
            "note_rows_by_kind": {kind: k.note_rows for kind, k in sql.by_kind.items() if k.note_rows}}


def decoded(sql: StatementTally, snapshots: int) -> dict[str, Any]:
    """The rows the driver decoded: note rows (a note's fields, storage.database.NOTE_TEXT_LABELS)
    and all rows (ids and folder, notebook and access rows too), in all and per snapshot."""
    return {"note_rows_decoded": sql.note_rows, "rows_decoded": sql.rows,
            "note_rows_per_snapshot": ratio(sql.note_rows, snapshots),
            "all_rows_per_snapshot": ratio(sql.rows, snapshots), **_by_kind(sql)}


def compare_paths(bench: Bench, engine: Database, batched: Wiring, full: Wiring,
                  label: str) -> dict[str, Any]:
    """Batched and full over the same first pieces of ``full``'s source; see the module docstring."""
    settings, want = full.settings, bench.plan.full_notes
    pieces = first_pieces(full.source, settings.rebuild_piece_notes, want)
    ids = sorted(i for p in pieces for i in p.ids)
    middle = (full.source.live_ids_after(0, max(1, full.source.count_live() // 2)) or [0])[-1]
    paged = full.source.live_ids_after(middle, len(ids))
    slow = timed_run(engine, lambda: batched.rebuild(paged), len(paged))
    same = timed_run(engine, lambda: batched.rebuild(ids), len(ids))
    carry = full.piece_carry()
    fast = timed_run(engine, lambda: full.rebuild_pieces([p.ids for p in pieces], carry=carry),
                     len(ids))
    with counted_statements(engine) as sql:  # (the same carry: nothing forgotten in between)
        warm = figures(full.rebuild_pieces([p.ids for p in pieces], carry=carry), sql, len(ids))
    rss = _child_peak_rss_mb(settings, pieces)
    speedup = ratio(fast["snapshots_per_s"], slow["snapshots_per_s"])
    ceiling = ratio(warm["snapshots_per_s"], slow["snapshots_per_s"])
    say(f"full path {label}: {fast['snapshots_per_s']:.0f} snapshots/s over {len(ids):,} notes "
        f"in {len(pieces)} pieces against {slow['snapshots_per_s']:.0f} paged ({speedup:.2f}×) and "
        f"{same['snapshots_per_s']:.0f} batched over the same notes; note rows decoded per "
        f"snapshot {fast['note_rows_per_snapshot']:.2f} ({slow['note_rows_per_snapshot']:.2f} "
        f"paged; all rows {fast['all_rows_per_snapshot']:.2f}); peak RSS {rss:.0f} MB; "
        f"warm {warm['snapshots_per_s']:.0f} snapshots/s ({ceiling:.2f}× paged, "
        f"{warm['sql_statements']} statements)")
    return {"notes": len(ids), "pieces": len(pieces), "batched": slow, "same_notes": same,
            "full": fast, "warm": warm, "speedup": speedup, "speedup_warm": ceiling,
            "speedup_same_notes": ratio(fast["snapshots_per_s"], same["snapshots_per_s"]),
            "rows_per_snapshot": fast["note_rows_per_snapshot"],
            "all_rows_per_snapshot": fast["all_rows_per_snapshot"], "peak_rss_mb": rss}


def spawned_settings(settings: Settings, redis_prefix: str) -> dict[str, Any]:
    """What a spawned rebuild process passes to ``load_settings``: ``settings``' database, Redis,
    strategies and pieces, its snapshots under ``redis_prefix``."""
    names = ("database_url", "redis_url", "redis_cluster", "schema_name", "strategies", "seeds",
             "max_token_limit", "layered_limits", "rebuild_piece_notes", "piece_carry_foci")
    return {**{name: getattr(settings, name) for name in names}, "redis_prefix": redis_prefix}


def _child_peak_rss_mb(settings: Settings, pieces: list[Piece]) -> float:
    """The peak RSS of a fresh process running the full path over ``pieces``."""
    # (its keys are deleted with the run's)
    overrides = spawned_settings(settings, f"{settings.redis_prefix}-rss")
    return float(spawned_full_run(overrides, [p.ids for p in pieces])["peak_rss_mb"])


def own_engine(wiring: Wiring) -> Database:
    """A fresh engine ``wiring`` reads through, so its statements alone are counted on it."""
    engine = open_engine(wiring.settings.database_url)
    wiring.source = open_source(engine, wiring.settings.schema_name)
    return engine


def spawned_full_run(overrides: dict[str, Any],
                     pieces: list[list[int]] | None = None) -> dict[str, Any]:
    """The full path in a fresh (spawned) process with ``load_settings(**overrides)``, over
    ``pieces`` (None: every piece of the database): its figures, rows decoded and own peak RSS."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        out: dict[str, Any] = pool.apply(_full_run, (overrides, pieces))
    return out


def _full_run(overrides: dict[str, Any], pieces: list[list[int]] | None) -> dict[str, Any]:
    """(In the spawned process.) See :func:`spawned_full_run`."""
    wiring = Wiring(load_settings(**overrides))
    engine = own_engine(wiring)
    chosen = pieces if pieces is not None else [
        p.ids for p in wiring.source.workspaces(wiring.settings.rebuild_piece_notes)]
    out = timed_run(engine, lambda: wiring.rebuild_pieces(chosen), sum(map(len, chosen)))
    return out | {"pieces": len(chosen), "peak_rss_mb": peak_rss_kb() / 1024}
