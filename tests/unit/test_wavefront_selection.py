"""The wavefront's budgets and selection: what is picked within a tokenLimit (in rank order, up to the
first note that does not fit; the focus's lists hold only picked notes), how notes are ranked
(relationship groups, then the seeded jitter, exact ties to the smaller id), and that expansion stops
once the estimate of its pool exceeds 1.2 times the budget."""

from __future__ import annotations

import pytest

import graphrag
from graphrag import StrategyParams, WavefrontParams
from tests.support import DAY_MS, NOW_MS, Graph
from tests.unit.helpers import doc, ids_with, rels, spec_u, uris
from tests.unit.wavefront_graphs import BIG, family, wf


# -- budgets and selection ------------------------------------------------------------------------------
@pytest.mark.parametrize("limit", [0, 1, 10])
def test_budget_zero_or_below_focus_cost_gives_no_related_notes(limit: int) -> None:
    out = wf(family(), 5, token_limit=limit)
    parsed = doc(out)
    assert out.focus.tokens > 10
    assert parsed["relatedNotes"] == []
    for key in ("children", "priorSiblings", "youngerSiblings", "inboundReferences"):
        assert parsed["focusNote"][key] == []
    assert parsed["focusNote"]["contextualPath"] == ["/n1", "/n2"]


def test_selection_stops_at_the_first_note_that_does_not_fit() -> None:
    g = Graph()
    # a big, fresh parent outranks an old, small child (both core, wave 1; recency 5 vs ~0)
    g.add(1, title="P" * 600, created_at_ms=NOW_MS)
    g.add(2, parent_id=1, title="focus", created_at_ms=NOW_MS)
    g.add(3, parent_id=2, title="c", created_at_ms=NOW_MS - 5 * 365 * DAY_MS)
    full = wf(g, 2)
    assert [p.note_id for p in full.picks] == [1, 3]
    parent_cost, child_cost = full.picks[0].tokens, full.picks[1].tokens
    assert child_cost < parent_cost
    limit = full.focus.tokens + parent_cost - 1  # the child alone would fit
    assert child_cost <= parent_cost - 1
    assert wf(g, 2, token_limit=limit).picks == ()
    assert [p.note_id for p in wf(g, 2, token_limit=limit + 1).picks] == [1]


def test_focus_lists_hold_only_selected_notes_in_the_right_order() -> None:
    g = family()
    full = wf(g, 5)
    assert len(full.picks) > 8
    for k in range(len(full.picks) + 1):
        limit = full.focus.tokens + sum(p.tokens for p in full.picks[:k])
        out = wf(g, 5, token_limit=limit, traversal_token_limit=BIG)
        parsed = doc(out)
        chosen = rels(out)
        assert len(chosen) == k
        focus = parsed["focusNote"]
        assert focus["children"] == uris([i for i, r in chosen if r == "Child"])
        assert focus["inboundReferences"] == uris([i for i, r in chosen if r == "InboundReference"])
        order = {i: g.notes[i].skeleton().order_key for i, _ in chosen}
        prior = sorted((i for i, r in chosen if r == "PriorSibling"), key=order.__getitem__)
        younger = sorted((i for i, r in chosen if r == "YoungerSibling"), key=order.__getitem__)
        assert focus["priorSiblings"] == uris(prior)
        assert focus["youngerSiblings"] == uris(younger)


@pytest.mark.parametrize("seed", range(6))
def test_equal_notes_are_ranked_by_the_seeded_jitter(seed: int) -> None:
    g = Graph()
    g.add(1, title="focus")
    g.add(7, parent_id=1, sibling_order=2, title="same")
    g.add(3, parent_id=1, sibling_order=1, title="same")
    # same label, wave and age: only jitter u(seed, "jitter", id) - 0.5 separates them
    expected = sorted((3, 7), key=lambda i: -spec_u(seed, "jitter", i))
    assert [i for i, _ in rels(wf(g, 1, seed=seed))] == expected


def test_exact_score_ties_go_to_the_smaller_id() -> None:
    g = Graph()
    g.add(1, title="focus")
    g.add(7, parent_id=1, sibling_order=1, title="same")
    g.add(3, parent_id=1, sibling_order=2, title="same")
    no_jitter = StrategyParams(wavefront=WavefrontParams(jitter_range=0.0))
    for seed in range(4):
        assert [i for i, _ in rels(wf(g, 1, seed=seed, params=no_jitter))] == [3, 7]


def test_related_notes_are_in_descending_relationship_groups() -> None:
    out = wf(family(), 5)
    weights = [graphrag.tree.labels.WEIGHTS[graphrag.Relation(r)] for _, r in rels(out)]
    assert weights == sorted(weights, reverse=True)
    assert {10.0, 5.0, 2.0} <= set(weights)


def test_small_budget_stops_expansion_early() -> None:
    g = family()
    focus_tokens = wf(g, 5).focus.tokens
    g.loads.clear()
    # a budget of 100 tokens: the wave-1 pool (parent, 2 children, 2 inbound) exceeds 1.2 x 100
    out = wf(g, 5, token_limit=focus_tokens + 100)
    assert out.picks  # room for something
    children_asked = set().union(*(need.children for need in g.loads))
    assert children_asked == {5}
    g.loads.clear()
    wf(g, 5)
    assert len(set().union(*(need.children for need in g.loads))) > 1


def test_expansion_stops_exactly_above_1_2_times_the_maximum_budget() -> None:
    g = family()
    full = wf(g, 5)
    cost = {p.note_id: p.tokens for p in full.picks}
    children = ids_with(full, "Child")
    assert len(children) == 3  # wave 1 draws 2 of them (the top two ranked), wave 2 the third
    wave1 = [2, *children[:2], 21, 22]  # parent, the block of children, both inbound references
    estimate = sum(cost[i] for i in wave1)
    stop = max(b for b in range(estimate) if estimate > 1.2 * b)
    for budget, expands in ((stop, False), (stop + 1, True)):
        g.loads.clear()
        wf(g, 5, token_limit=full.focus.tokens + budget)
        asked = set().union(*(need.children for need in g.loads))
        assert (asked != {5}) is expands, budget
