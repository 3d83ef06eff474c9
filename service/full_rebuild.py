"""The full rebuild over whole workspaces: each piece of the database read once, then computed.

The nightly rebuild, ``graphrag rebuild --all`` and change capture's recovery rebuild every live
note. Paging ids spreads a notebook's notes over many batches, so the rows around a focus (its
parent, children, peers, link targets) were read, decoded and costed again by each batch that
showed them. Here the source hands out *pieces* (:meth:`service.ports.NoteSource.workspaces`):
notebooks in order, then the notes in no notebook, packed into pieces of at most ``max_notes``
notes (the memory and time bound of one workspace and one task; storage.pieces). Each piece is
one epoch of :func:`service.rebuild.rebuild` with ``preload``: its generations and the edit ``seq``
are read first, then the piece's own rows, links and lists are loaded over the whole piece
(graphrag.tree.preload, graphrag.wiki.preload), and
its foci are computed in batches against that one workspace; what lies outside the piece (a link
into another notebook, a referrer elsewhere) is loaded on demand, batched as ever.

The workspace is carried on from piece to piece (service.carry) while the edit ``seq`` stands still,
up to ``carry``'s bound on the foci it served: a row loaded on demand for one piece is still there
when its own piece comes, or when a later piece shows it again, so over a whole run each note row
is decoded once per process and each note costed once, where a workspace per piece read a notebook's
neighbours again for every piece that showed them. A run starts with a new ``seq``
(service.rebuild.start_full_rebuild), so nothing read before the run is carried into it; an event
during the run moves ``seq`` and the next piece starts afresh. The bound is the memory of the
rebuilding process: a workspace holds what its foci loaded (a whole run over a 100k bench graph
peaked at 850 MB on the tree and 910 MB on today's Doughnut, about 9 KB per focus;
docs/capacity.md), and when it has served its bound the next piece starts a new one.

Nothing of the write is new: the same compare-and-set with the generations read before the piece's
SQL, the same race check against the edit stamps and the full rebuild's stamp, the same removal of
a focus found deleted. So an edit that lands during a run is never overwritten by older data, and
the bytes written are those the batched path writes (tests/usecases/test_full_rebuild.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from service.carry import Carry
from service.context import ContextService
from service.ports import SnapshotCache
from service.rebuild import BATCH_SIZE, RebuildReport, rebuild

__all__ = ["PIECE_CARRY_FOCI", "rebuild_pieces"]

#: The foci a carried workspace serves before the next piece starts a new one (the default of
#: ``GRAPHRAG_PIECE_CARRY_FOCI``): the memory bound of a rebuilding process.
PIECE_CARRY_FOCI = 100_000


def rebuild_pieces(
    service: ContextService, store: SnapshotCache, pieces: Iterable[Sequence[int]], *,
    strategies: Sequence[str], seeds: Sequence[int], max_token_limit: int,
    layered_limits: Sequence[int] = (2500, 5000), now_ms: int, batch_size: int = BATCH_SIZE,
    progress: Callable[[int], None] | None = None, carry: Carry | None = None,
) -> RebuildReport:
    """Rebuild every piece, its notes loaded first, the workspace carried on by ``carry`` (a
    worker process's, so its next call continues it; by default one for this call, bounded at
    :data:`PIECE_CARRY_FOCI`): see the module docstring. One report."""
    started, reports = time.perf_counter(), []
    carry = carry or Carry(max_foci=PIECE_CARRY_FOCI)
    for piece in pieces:
        reports.append(rebuild(
            service, store, piece, strategies=strategies, seeds=seeds,
            max_token_limit=max_token_limit, layered_limits=layered_limits, now_ms=now_ms,
            batch_size=batch_size, epoch_size=max(len(piece), batch_size), progress=progress,
            carry=carry, preload=True))
    return _combined(reports, time.perf_counter() - started)


def _combined(reports: list[RebuildReport], seconds: float) -> RebuildReport:
    errors = {k: v for r in reports for k, v in r.errors.items()}
    return RebuildReport(
        sum(r.count for r in reports), errors, seconds, sum(r.rejected for r in reports),
        frozenset().union(*(r.deleted for r in reports)),
        frozenset().union(*(r.requeue for r in reports)), sum(r.foci for r in reports))
