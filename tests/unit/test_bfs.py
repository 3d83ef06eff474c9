"""relationship-bfs (docs/algorithms.md): each rule pinned on a small graph, plus properties."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from graphrag import Relation, slice_result
from graphrag.tree.bfs import ordered_relationships, translate
from graphrag.tree.labels import label_of_path
from tests.support import Graph, compute

BFS = "relationship-bfs"


def related(graph: Graph, focus: int, **kw: object) -> list[tuple[int, Relation]]:
    outcome = compute(graph, focus, BFS, **kw)  # type: ignore[arg-type]
    return [(p.note_id, p.relation) for p in outcome.picks]


def ids(graph: Graph, focus: int, **kw: object) -> list[int]:
    return [i for i, _ in related(graph, focus, **kw)]


# -- ordering of relationships ------------------------------------------------------------------
def test_focus_order_by_weight_then_base_order() -> None:
    assert ordered_relationships(()) == (
        "parent", "target", "sibling", "target-sibling", "child", "inbound-ref")


def test_after_child_siblings_first() -> None:
    assert ordered_relationships(("child",))[:2] == ("sibling", "target-sibling")


def test_after_inbound_ref_target_siblings_first() -> None:
    assert ordered_relationships(("inbound-ref",))[0] == "target-sibling"


def test_no_child_after_parent() -> None:
    order = ordered_relationships(("parent",))
    assert "child" not in order
    assert order[:2] == ("parent", "target")


def test_default_prefers_parent_and_target() -> None:
    assert ordered_relationships(("sibling",)) == (
        "parent", "target", "sibling", "target-sibling", "child", "inbound-ref")


# -- label translation ----------------------------------------------------------------------------
def test_translation_cancels_child_parent_and_inbound_object() -> None:
    assert translate(("child", "sibling")) == "C"
    assert translate(("inbound-ref", "target-sibling")) == "I"
    assert translate(("parent", "sibling")) == "PPC"
    assert translate(("child", "child", "parent", "parent")) == ""
    assert label_of_path(translate(("target-sibling",))) is Relation.REMOTELY_RELATED
    assert label_of_path(translate(("parent", "sibling"))) is Relation.SIBLING_OF_PARENT


# -- primitives -----------------------------------------------------------------------------------
def family() -> Graph:
    g = Graph()
    g.add(1)
    for i, order in ((10, 10), (11, 20), (12, 30), (13, 40), (14, 50)):
        g.add(i, parent_id=1, sibling_order=order)
    return g


def test_first_wave_takes_the_parent_then_nearest_sibling_right_side_on_ties() -> None:
    g = family()
    # wave 1: focus 12 -> parent 1; wave 2: focus -> sibling: 11 and 13 tie, the younger (13) wins
    assert ids(g, 12, params=None)[:2] == [1, 13]


def test_deleted_siblings_are_removed_before_indices_are_taken() -> None:
    g = family()
    g.notes[13].deleted = True
    got = ids(g, 12)
    assert 13 not in got
    assert got[:2] == [1, 14]  # 11 and 14 are both at distance 1 once 13 is gone; right wins


def test_a_note_found_earlier_in_the_same_wave_is_taken_so_the_primitive_yields_its_next_choice(
) -> None:
    g = Graph()
    g.add(1)
    for i, order in ((10, 10), (11, 20), (12, 30), (13, 40)):
        g.add(i, parent_id=1, sibling_order=order)
    g.add(30, parent_id=13)
    # wave 1: focus 12 -> parent 1; wave 2: focus -> sibling 13 (right side wins the tie);
    # wave 3: focus -> sibling 11; then 13's nearest untaken sibling would be 11, found earlier in
    # this wave: it counts as taken, so 13's sibling primitive yields its next choice, 10 (the other
    # reading wastes the sibling relationship and moves on to 13's child 30).
    assert ids(g, 12)[:4] == [1, 13, 11, 10]


def test_sibling_and_target_sibling_yield_nothing_through_a_deleted_target() -> None:
    g = Graph()
    g.add(1)
    g.add(3, parent_id=1, deleted=True)
    for link in (40, 41, 42):
        g.add(link, target_id=3)
    # focus 41 points at a deleted note: no object, and no target-siblings (40, 42) through it
    assert ids(g, 41) == []
    g.notes[3].deleted = False
    assert ids(g, 41)[:2] == [3, 42]  # the control: live, the target and its siblings are found


def test_deleted_parent_yields_nothing() -> None:
    g = family()
    g.notes[1].deleted = True
    assert related(g, 12) == []


def test_child_is_the_first_in_sibling_order_and_inbound_the_smallest_id() -> None:
    g = Graph()
    g.add(1)
    g.add(30, parent_id=1, sibling_order=5)
    g.add(20, parent_id=1, sibling_order=9)
    g.add(7, parent_id=30, target_id=1)
    g.add(5, parent_id=20, target_id=1)
    got = related(g, 1)
    assert got[0] == (30, Relation.CHILD)  # no parent/target/sibling: child first
    assert (5, Relation.INBOUND_REFERENCE) in got
    assert got.index((5, Relation.INBOUND_REFERENCE)) < got.index((7, Relation.INBOUND_REFERENCE))


def test_target_sibling_is_nearest_by_id_ties_to_larger_id() -> None:
    g = Graph()
    g.add(1)
    g.add(2, parent_id=1)
    for link in (40, 41, 42, 43, 44):
        g.add(link, parent_id=2, target_id=1)
    # focus 42's relationships: parent 2, target 1, then target-sibling: 41 and 43 tie -> 43
    assert ids(g, 42)[:3] == [2, 1, 43]


def test_waves_join_in_finder_order_and_grow_by_doubling_at_most() -> None:
    g = family()
    for i in range(20, 30):
        g.add(i, parent_id=12)
    out = compute(g, 12, BFS)
    assert len(out.picks) <= 31
    # wave 1 = [1]; wave 2 = focus's find then 1's find (1 has no relations left) -> [13]
    assert [p.note_id for p in out.picks][:2] == [1, 13]


def test_labels_of_focus_relations_win_over_paths() -> None:
    g = family()
    g.add(50, parent_id=1, target_id=12, sibling_order=60)  # a sibling that also points at focus
    labels = dict(related(g, 12))
    assert labels[50] is Relation.INBOUND_REFERENCE
    assert labels[1] is Relation.PARENT
    assert labels[11] is Relation.PRIOR_SIBLING
    assert labels[13] is Relation.YOUNGER_SIBLING


def test_seed_is_ignored() -> None:
    g = family()
    assert compute(g, 12, BFS, seed=1).to_json() == compute(g, 12, BFS, seed=99).to_json()


# -- properties -----------------------------------------------------------------------------------
@st.composite
def graphs(draw: st.DrawFn) -> tuple[Graph, int]:
    size = draw(st.integers(2, 40))
    g = Graph()
    for i in range(1, size + 1):
        parent = draw(st.one_of(st.none(), st.integers(1, i - 1))) if i > 1 else None
        target = draw(st.one_of(st.none(), st.integers(1, size))) if draw(st.booleans()) else None
        g.add(i, parent_id=parent, target_id=target, sibling_order=draw(st.integers(-3, 3)),
              deleted=draw(st.integers(0, 9)) == 0)
    live = [i for i, n in g.notes.items() if not n.deleted]
    focus = draw(st.sampled_from(live)) if live else 1
    g.notes[focus].deleted = False
    return g, focus


@settings(max_examples=150, deadline=None)
@given(graphs(), st.integers(0, 3000))
def test_labels_agree_budget_holds_and_smaller_limits_are_prefixes(
    case: tuple[Graph, int], limit: int
) -> None:
    g, focus = case
    full = compute(g, focus, BFS, token_limit=3000)
    f = g.notes[focus]
    for pick in full.picks:
        note = g.notes[pick.note_id]
        assert not note.deleted
        if pick.relation is Relation.PARENT:
            assert pick.note_id == f.parent_id
        if pick.relation is Relation.CHILD:
            assert note.parent_id == focus
        if pick.relation is Relation.OBJECT:
            assert pick.note_id == f.target_id
        if pick.relation is Relation.INBOUND_REFERENCE:
            assert note.target_id == focus
        if pick.relation in (Relation.PRIOR_SIBLING, Relation.YOUNGER_SIBLING):
            assert note.parent_id == f.parent_id
            after = note.skeleton().order_key > f.skeleton().order_key
            assert after == (pick.relation is Relation.YOUNGER_SIBLING)
    small = compute(g, focus, BFS, token_limit=limit, seed=7)
    assert not small.picks or small.focus.tokens + sum(small.related_tokens) <= limit
    sliced = slice_result(orjson.loads(full.to_json()), full.focus.tokens, full.related_tokens, limit)
    assert orjson.dumps(sliced) == small.to_json()
