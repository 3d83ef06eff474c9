"""What a full rebuild loads of a piece of the tree before computing its foci.

A full rebuild (service.rebuild, ``preload``) computes every live note of a piece (a notebook's
notes, service.full_rebuild) with one workspace. Loading the piece's own rows, children lists and
referrer lists first, in IN statements over the whole piece, decodes each of its rows once for the
whole piece: the computations then find them loaded, and only what lies outside the piece (a
parent in another notebook, a link's target) is loaded on demand, batched as ever. The rows are the
same rows the computations would have loaded themselves, so what is written is byte for byte the
same (tests/usecases/test_full_rebuild.py).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable

from graphrag.tree.model import Need

__all__ = ["preload_rounds"]


def preload_rounds(view: object, ids: Iterable[int]) -> Generator[Need, None, None]:
    """One round: the rows, live children and live referrers of ``ids``."""
    wanted = frozenset(ids)
    yield Need(children=wanted, inbound=wanted, rows=wanted)
