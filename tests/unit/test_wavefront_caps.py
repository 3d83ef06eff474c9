"""The wavefront's caps on hand-built graphs: a monster parent shows a seeded contiguous block of
children that grows nearest-first, the parent of the focus shows the siblings nearest to it (ties
broken by the seeded near draw), inbound references are the lowest draws, six at most, and the
candidate pool never exceeds its cap of 200."""

from __future__ import annotations

import math

import pytest

from graphrag import OnePerNoteCounter, StrategyParams, WavefrontParams
from tests.support import Graph, compute
from tests.unit.helpers import doc, ids_with, rels, spec_u, uris
from tests.unit.wavefront_graphs import BIG, dense, monster, relation_of, wf


# -- caps -------------------------------------------------------------------------------------------
def test_focus_gets_at_most_six_children_by_wave_three() -> None:
    out = wf(monster(), 1)
    kids = ids_with(out, "Child")
    assert len(kids) == 6
    assert len(out.picks) == 6


@pytest.mark.parametrize("n", [7, 500])
@pytest.mark.parametrize("seed", range(6))
def test_first_children_are_the_seeded_contiguous_block_then_grow_around_it(
    seed: int, n: int
) -> None:
    out = wf(monster(n), 1, seed=seed)
    kids = [k - 1000 for k in ids_with(out, "Child")]  # as indices in sibling order
    assert len(kids) == 6
    # wave 1 draws a block of k = 2 at start = floor(u(seed, "block", parent) x (n - k + 1))
    start = math.floor(spec_u(seed, "block", 1) * (n - 2 + 1))
    block = {start, start + 1}

    def nearest(picked: set[int]) -> set[int]:
        free = [
            (min(abs(i - j) for j in picked), spec_u(seed, "near", 1000 + i), i)
            for i in range(n)
            if i not in picked
        ]
        return {i for _, _, i in sorted(free)[:2]}

    wave2 = nearest(block)
    wave3 = nearest(block | wave2)
    # same age, same label: the depth bonus (1.0, 0.7, 0.4) orders the waves
    assert set(kids[:2]) == block
    assert set(kids[2:4]) == wave2
    assert set(kids[4:]) == wave3
    assert sorted(kids) == list(range(min(kids), min(kids) + 6))  # nearest-first stays contiguous
    assert doc(out)["focusNote"]["children"] == uris([1000 + k for k in kids])


def test_different_seeds_pick_different_blocks() -> None:
    g = monster()
    blocks = {tuple(sorted(ids_with(wf(g, 1, seed=s), "Child"))) for s in range(8)}
    assert len(blocks) > 1


def test_monster_parent_of_the_focus_shows_nearest_siblings_only() -> None:
    g = monster()
    focus = 1000 + 250
    out = wf(g, focus)
    # parent enters in wave 1: 2 children in wave 2, 4 in wave 3, nearest to the focus first
    assert set(ids_with(out, "PriorSibling")) == {focus - 1, focus - 2}
    assert set(ids_with(out, "YoungerSibling")) == {focus + 1, focus + 2}
    assert out.prior_siblings == (focus - 2, focus - 1)
    assert out.younger_siblings == (focus + 1, focus + 2)
    assert ids_with(out, "Parent") == [1]
    assert len(out.picks) == 5


@pytest.mark.parametrize("seed", range(5))
def test_nearest_sibling_ties_are_broken_by_the_near_draw(seed: int) -> None:
    g = Graph()
    g.add(1, title="parent")
    focus, target = 300, 106
    sibs = [100, 101, focus, 103, 104, 105, target, 107, 108, 109]
    for i, k in enumerate(sibs):
        g.add(k, parent_id=1, sibling_order=i)
    g.notes[focus].target_id = target
    g.notes[focus].title = ":next to"
    out = wf(g, focus, seed=seed)
    assert relation_of(out)[target] == "Object"

    def nearest(picked: set[int], room: int) -> list[int]:
        free = [
            (min(abs(i - j) for j in picked), spec_u(seed, "near", k), k)
            for i, k in enumerate(sibs)
            if i not in picked
        ]
        return [k for _, _, k in sorted(free)[:room]]

    # wave 2: the parent's cap is 2; the pooled focus (index 2) and object (index 6) count as
    # picked, so indices 1, 3, 5, 7 tie at distance 1 and the two lowest u(seed, "near", id) win
    wave2 = nearest({2, 6}, 2)
    assert set(wave2) <= {101, 103, 105, 107}
    # wave 3: the cap grows to 4, two more nearest to everything picked so far
    wave3 = nearest({2, 6, *(sibs.index(k) for k in wave2)}, 2)
    ranked = [i for i, r in rels(out) if r in ("PriorSibling", "YoungerSibling")]
    assert len(ranked) == 4
    assert set(ranked[:2]) == set(wave2)  # depth bonus 0.7 outranks 0.4
    assert set(ranked[2:]) == set(wave3)
    for k in ranked:
        expected = "PriorSibling" if sibs.index(k) < 2 else "YoungerSibling"
        assert relation_of(out)[k] == expected


@pytest.mark.parametrize("seed", range(4))
def test_inbound_references_are_the_lowest_u_draws_capped_at_six(seed: int) -> None:
    g = Graph()
    g.add(1, title="hub")
    refs = list(range(100, 130))
    for r in refs:
        g.add(r, target_id=1, title=f":cites {r}")
    out = wf(g, 1, seed=seed)
    ranked = sorted(refs, key=lambda r: spec_u(seed, "inbound", r))
    inbound = ids_with(out, "InboundReference")
    assert len(inbound) == 6
    assert set(inbound) == set(ranked[:6])
    assert set(inbound[:2]) == set(ranked[:2])  # wave-1 draws outrank later top-ups
    assert doc(out)["focusNote"]["inboundReferences"] == uris(inbound)


def test_pool_never_exceeds_200_candidates() -> None:
    g = dense()
    uncapped = StrategyParams(wavefront=WavefrontParams(max_total_candidates=100_000))
    counter = OnePerNoteCounter()
    free = compute(g, 1, "wavefront", token_limit=BIG, counter=counter, params=uncapped)
    assert len(free.picks) > 200, "the graph must be big enough for the cap to bind"
    capped = compute(g, 1, "wavefront", token_limit=BIG, counter=counter)
    assert len(capped.picks) == 200
    ids = {p.note_id for p in capped.picks}
    assert len(ids) == 200
    assert ids <= {p.note_id for p in free.picks}  # the first 200 of the same discovery order
    small = StrategyParams(wavefront=WavefrontParams(max_total_candidates=37))
    assert len(compute(g, 1, "wavefront", token_limit=BIG, counter=counter, params=small).picks) == 37
