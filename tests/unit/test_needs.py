"""A batch's needs merged in one pass are the pairwise union (``|``) of them, for both models."""

from __future__ import annotations

from functools import reduce
from operator import or_

from hypothesis import given
from hypothesis import strategies as st

from graphrag.tree.model import Need
from graphrag.wiki.model import Viewer, WikiNeed

_IDS = st.frozensets(st.integers(0, 30), max_size=6)
_LENGTHS = st.dictionaries(st.tuples(st.integers(0, 5), st.none() | st.integers(0, 2)),
                           st.integers(1, 9), max_size=4)


@given(st.lists(st.builds(Need, _IDS, _IDS, _IDS, _IDS, _IDS), min_size=1, max_size=8))
def test_tree_needs_union_is_their_pairwise_union(needs: list[Need]) -> None:
    assert Need.union(needs) == reduce(or_, needs)


@st.composite
def _wiki_needs(draw: st.DrawFn) -> WikiNeed:
    peers = {(nb, folder, None): n for (nb, folder), n in draw(_LENGTHS).items()}
    referrers = {(t, seed, Viewer(user_id=1)): n for (t, seed), n in draw(_LENGTHS).items()}
    access = {(Viewer(user_id=u), nb) for u, nb in draw(st.sets(st.tuples(st.integers(1, 3),
                                                                            st.integers(0, 3))))}
    return WikiNeed.of(notes=draw(_IDS), folders=draw(_IDS), notebooks=draw(_IDS),
                       links=draw(_IDS), referrers=referrers, peers=peers, access=access)


@given(st.lists(_wiki_needs(), min_size=1, max_size=8))
def test_wiki_needs_union_is_their_pairwise_union_with_the_longest_lengths(
    needs: list[WikiNeed],
) -> None:
    assert WikiNeed.union(needs) == reduce(or_, needs)
