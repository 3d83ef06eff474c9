"""What a full rebuild loads of a notebook before computing its foci (the wiki model).

As for the tree (graphrag.tree.preload): the notes of a piece of a notebook, their link lists
(with the link targets' rows) and then their folders and notebooks are loaded over the whole piece,
so each of those rows is decoded once for it. Referrer and peer samples depend on the viewer and the
seed and stay loaded on demand, batched. The data is what the computations would load themselves,
so the bytes written are the same.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable

from graphrag.wiki.model import WikiNeed
from graphrag.wiki.view import WikiView

__all__ = ["preload_rounds"]


def preload_rounds(view: WikiView, ids: Iterable[int]) -> Generator[WikiNeed, None, None]:
    """Two rounds: the notes and their links, then the folders and notebooks of those notes."""
    wanted = frozenset(ids)
    yield WikiNeed(notes=wanted, links=wanted)
    notes = [n for i in wanted if view.has_note(i) and (n := view.note(i)) is not None]
    folders = {n.folder_id for n in notes if n.folder_id is not None}
    notebooks = {n.notebook_id for n in notes if n.notebook_id is not None}
    yield WikiNeed(folders=frozenset(folders), notebooks=frozenset(notebooks))
