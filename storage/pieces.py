"""The pieces of a full rebuild (service.full_rebuild), from notes' notebooks: one place for the
SQL profiles and the in-memory sources to cut them alike.

Notebooks are taken by ascending id, each one's live notes by ascending id, the notes in no
notebook last; that sequence is packed into pieces of at most ``max_notes``: small notebooks share
a piece (a task and a workspace per five-note notebook would cost more than the notes), a big one
spans several. Every live id is in exactly one piece. A piece's cursor (its last note's notebook and
id) is where the sequence continues, so pieces handed out from a cursor are the ones an unbroken
pass hands out after it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator

from service.ports import Cursor, Piece

__all__ = ["by_notebook", "order", "packed"]


def order(notebook: int | None) -> tuple[bool, int]:
    """The order of notebooks in a full rebuild: by id, no notebook last."""
    return notebook is None, notebook or 0


def packed(groups: Iterable[tuple[int | None, list[int]]], max_notes: int) -> Iterator[Piece]:
    """``(notebook, ascending live ids)`` groups, in order, packed into pieces of at most
    ``max_notes`` (at least 1) notes."""
    size, ids, last = max(1, max_notes), list[int](), None
    for notebook, members in groups:
        at = 0
        while at < len(members):
            take = members[at:at + size - len(ids)]
            ids += take
            at, last = at + len(take), notebook
            if len(ids) == size:
                yield Piece(notebook, ids)
                ids = []
    if ids:
        yield Piece(last, ids)


def by_notebook(notes: Iterable[tuple[int, int | None]], max_notes: int,
                after: Cursor = None) -> Iterator[Piece]:
    """The pieces of live ``(note id, notebook id or None)`` pairs after the cursor ``after``."""
    groups: dict[int | None, list[int]] = defaultdict(list)
    for note_id, notebook_id in notes:
        groups[notebook_id].append(note_id)
    return packed(_after(groups, after), max_notes)


def _after(groups: dict[int | None, list[int]],
           after: Cursor) -> Iterator[tuple[int | None, list[int]]]:
    for notebook_id in sorted(groups, key=order):
        if after is not None and order(notebook_id) < order(after[0]):
            continue
        last = after[1] if after is not None and after[0] == notebook_id else 0
        yield notebook_id, sorted(i for i in groups[notebook_id] if i > last)
