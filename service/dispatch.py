"""The nightly full rebuild's dispatcher: hand out the database's pieces as rebuild tasks.

Pieces are notebooks in order, then the notes in no notebook, packed into pieces of at most
``max_notes`` notes (:meth:`service.ports.NoteSource.workspaces`); each is rebuilt with its rows
loaded first, into the workspace its worker process carries from piece to piece
(service.full_rebuild). Pieces are handed out in (notebook, id) order from a cursor, the last
handed-out piece's (notebook, last id), so a dispatch call costs the same wherever it continues.
A note created (or moved) during a run into a notebook the cursor has passed is left to its own
event and the next run; one moved the other way may be rebuilt twice. Back-pressure: while more
than ``max_backlog`` tasks wait on the bulk queue the dispatcher stops and asks to be called again
later, so a full rebuild never floods the broker. Progress is recorded per piece, so ``graphrag
rebuild --status`` follows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from service.ports import Cursor, NoteSource, ProgressLog

__all__ = ["DispatchStep", "dispatch_pieces"]


@dataclass(frozen=True, slots=True)
class DispatchStep:
    """Where a dispatch call stopped: ``finished`` (no ids left), ``waiting`` (back-pressure) or
    ``more`` (its quota is spent); ``after_id`` is the keyset position to continue from (the last
    id handed out), ``cursor`` the pieces' (the last piece's notebook and last id)."""

    state: Literal["finished", "waiting", "more"]
    after_id: int
    cursor: Cursor = None


def dispatch_pieces(
    source: NoteSource, progress: ProgressLog, *, run_id: str, after: Cursor, pieces: int,
    max_notes: int, backlog: Callable[[], int], max_backlog: int,
    enqueue: Callable[[list[int]], object], now_ms: Callable[[], int],
) -> DispatchStep:
    """Enqueue up to ``pieces`` pieces after the cursor ``after``; see the module docstring."""
    stream, last = source.workspaces(max_notes, after=after), 0 if after is None else after[1]
    for _ in range(pieces):
        if backlog() > max_backlog:
            return DispatchStep("waiting", last, after)
        piece = next(stream, None)
        if piece is None:
            progress.dispatched(run_id, now_ms=now_ms())
            return DispatchStep("finished", last, after)
        enqueue(piece.ids)
        after, last = piece.cursor, piece.ids[-1]
        progress.enqueued(run_id, len(piece.ids), last_id=last)
    return DispatchStep("more", last, after)

