"""The pieces of a full rebuild (service.full_rebuild), from notes' notebooks: one place for the
SQL profiles and the in-memory sources to cut them alike.

A piece is a notebook's live note ids in ascending order, cut into runs of at most ``max_notes``;
the notes in no notebook come last, cut the same way. Every live id is in exactly one piece.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence

from service.ports import Cursor, Piece

__all__ = ["by_notebook", "order", "runs"]


def order(notebook: int | None) -> tuple[bool, int]:
    """The order of notebooks in a full rebuild: by id, no notebook last."""
    return notebook is None, notebook or 0


def runs(ids: Sequence[int], max_notes: int) -> Iterator[list[int]]:
    """``ids`` cut into consecutive runs of at most ``max_notes`` (at least 1)."""
    size = max(1, max_notes)
    for start in range(0, len(ids), size):
        yield list(ids[start:start + size])


def by_notebook(notes: Iterable[tuple[int, int | None]], max_notes: int,
                after: Cursor = None) -> Iterator[Piece]:
    """The pieces of live ``(note id, notebook id or None)`` pairs after the cursor ``after``."""
    groups: dict[int | None, list[int]] = defaultdict(list)
    for note_id, notebook_id in notes:
        groups[notebook_id].append(note_id)
    for notebook_id in sorted(groups, key=order):
        if after is not None and order(notebook_id) < order(after[0]):
            continue
        last = after[1] if after is not None and after[0] == notebook_id else 0
        ids = sorted(i for i in groups[notebook_id] if i > last)
        yield from (Piece(notebook_id, run) for run in runs(ids, max_notes))
