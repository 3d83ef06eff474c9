"""Scenario tests of the layered strategy, Doughnut's production algorithm (docs/doughnut.md)."""

from __future__ import annotations

import gc

import pytest

import graphrag
from tests.support import NOW_MS, Graph, compute, compute_preloaded
from tests.unit.helpers import doc, ids_with, rels, spec_u, uris

BIG = 1_000_000


def lay(g: Graph, focus: int, **kw: object) -> graphrag.Outcome:
    kw.setdefault("token_limit", BIG)
    return compute(g, focus, "layered", **kw)  # type: ignore[arg-type]


def costs(g: Graph, focus: int) -> tuple[int, dict[int, int]]:
    """Focus cost and each related note's cost (chars counter) from an unlimited run."""
    full = lay(g, focus)
    return full.focus.tokens, {p.note_id: p.tokens for p in full.picks}


# -- layer order and switching -------------------------------------------------------------------------
def test_layer_one_parent_object_then_ancestors_root_first_with_parent_once() -> None:
    g = Graph()
    g.add(1, title="root")
    g.add(2, parent_id=1)
    g.add(3, parent_id=2, title="parent")
    g.add(5, title="target")
    g.add(4, parent_id=3, target_id=5, title=":link")
    assert rels(lay(g, 4)) == [
        (3, "Parent"),
        (5, "Object"),
        (1, "AncestorInContextualPath"),
        (2, "AncestorInContextualPath"),
    ]


def test_after_three_layer_one_notes_layer_two_runs_to_exhaustion() -> None:
    g = Graph()
    g.add(1, title="root")
    g.add(2, parent_id=1)
    g.add(3, parent_id=2, title="parent")
    g.add(5, title="target")
    g.add(4, parent_id=3, target_id=5, title=":link")
    g.add(6, parent_id=4)
    g.add(7, parent_id=4)
    # pass 1 of layer 1 takes Parent, Object, root (3 notes) -> layer 2 runs dry (both children)
    # -> layer 1 goes on with the rest of the contextual path
    assert [i for i, _ in rels(lay(g, 4))] == [3, 5, 1, 6, 7, 2]


def test_children_in_sibling_order_then_id() -> None:
    g = Graph()
    g.add(1, title="focus")
    g.add(10, parent_id=1, sibling_order=5)
    g.add(11, parent_id=1, sibling_order=-1)
    g.add(12, parent_id=1, sibling_order=5)
    g.add(13, parent_id=1, sibling_order=0)
    out = lay(g, 1)
    assert rels(out) == [(11, "Child"), (13, "Child"), (10, "Child"), (12, "Child")]
    assert doc(out)["focusNote"]["children"] == uris([11, 13, 10, 12])


def test_siblings_nearest_first_interleaved_by_passes() -> None:
    g = Graph()
    g.add(1, title="parent")
    # sibling order: 30 (-7), 31 (0), 32 (0), [focus 33 (0)], 34 (0), 35 (9)
    g.add(30, parent_id=1, sibling_order=-7)
    g.add(31, parent_id=1, sibling_order=0)
    g.add(32, parent_id=1, sibling_order=0)
    g.add(33, parent_id=1, sibling_order=0, title="focus")
    g.add(34, parent_id=1, sibling_order=0)
    g.add(35, parent_id=1, sibling_order=9)
    out = lay(g, 33)
    # layer 2, pass 1: prior 32, younger 34; pass 2: prior 31 reaches 3 -> switch;
    # pass 3: prior 30, younger 35
    assert rels(out) == [
        (1, "Parent"),
        (32, "PriorSibling"),
        (34, "YoungerSibling"),
        (31, "PriorSibling"),
        (30, "PriorSibling"),
        (35, "YoungerSibling"),
    ]
    focus = doc(out)["focusNote"]
    assert focus["priorSiblings"] == uris([30, 31, 32])
    assert focus["youngerSiblings"] == uris([34, 35])


@pytest.mark.parametrize(
    ("row", "parent", "spiral"),
    [
        ([1, 2, 3, 4, 5, 6, 7], 4, [3, 5, 2, 6, 1, 7]),  # left 1, right 1, left 2, right 2, ...
        ([1, 2, 3, 4, 5, 6], 2, [1, 3, 4, 5, 6]),  # the left side runs out, the right runs on
        ([1, 2, 3, 4, 5, 6], 5, [4, 6, 3, 2, 1]),  # the right side runs out, the left runs on
        ([2, 3, 4, 5, 6, 7], 2, [3, 4, 5, 6, 7]),  # no left side at all
    ],
)
def test_sibling_of_parent_spirals_around_the_parent(
    row: list[int], parent: int, spiral: list[int]
) -> None:
    g = Graph()
    g.add(100, title="grandparent")
    for order, sib in enumerate(row):
        g.add(sib, parent_id=100, sibling_order=order)
    g.add(50, parent_id=parent, title="focus")
    out = lay(g, 50)
    assert rels(out)[:2] == [(parent, "Parent"), (100, "AncestorInContextualPath")]
    assert ids_with(out, "SiblingOfParent") == spiral
    assert len(out.picks) == 2 + len(spiral)


def test_a_note_that_does_not_fit_is_skipped_and_a_later_one_accepted() -> None:
    g = Graph()
    g.add(1, title="parent")
    g.add(2, parent_id=1, sibling_order=1, title="sib")
    g.add(3, parent_id=1, sibling_order=2, title="focus")
    g.add(4, parent_id=3, sibling_order=1, title="B" * 900)  # big child, offered first
    g.add(5, parent_id=3, sibling_order=2, title="s")  # small child
    focus, cost = costs(g, 3)
    limit = focus + cost[1] + cost[2] + cost[5]
    assert cost[4] > cost[2] + cost[5]
    out = lay(g, 3, token_limit=limit)
    # layer 2, pass 1: child 4 does not fit (skipped), prior sibling 2 accepted; pass 2: child 5
    assert rels(out) == [(1, "Parent"), (2, "PriorSibling"), (5, "Child")]
    assert doc(out)["focusNote"]["children"] == ["/n5"]
    assert sum(p.tokens for p in out.picks) + out.focus.tokens <= limit


def test_a_pass_that_processes_nothing_ends_the_layer() -> None:
    # docs/doughnut.md: "A layer's loop ends when a pass processes nothing" - a rejected note is not
    # processed, so a root focus whose only layer-2 offer in a pass does not fit stops there.
    g = Graph()
    g.add(3, title="focus")
    g.add(4, parent_id=3, sibling_order=1, title="B" * 900)
    g.add(5, parent_id=3, sibling_order=2, title="s")
    focus, cost = costs(g, 3)
    assert lay(g, 3, token_limit=focus + cost[5]).picks == ()


def test_layer_four_counter_never_resets() -> None:
    g = Graph()
    g.add(100, title="grandparent")
    g.add(10, parent_id=100, sibling_order=1, title="uncle A")
    g.add(20, parent_id=100, sibling_order=2, title="parent")
    g.add(30, parent_id=100, sibling_order=3, title="uncle B")
    for k in (11, 12, 13):
        g.add(k, parent_id=10)
    for k in (31, 32, 33):
        g.add(k, parent_id=30)
    g.add(1, parent_id=20, title="focus")
    out = lay(g, 1, seed=3)
    cousins = [(i, r) for i, r in rels(out) if r == "ChildOfSiblingOfParent"]
    owners = ["A" if i < 20 else "B" for i, _ in cousins]
    # first layer-4 pass: A then B (2 processed); later passes stop after one processed note,
    # so A's handler runs dry before B's is asked again
    assert owners == ["A", "B", "A", "A", "B", "B"]
    for owner, kids in (("A", [11, 12, 13]), ("B", [31, 32, 33])):
        got = [i for (i, _), o in zip(cousins, owners, strict=True) if o == owner]
        assert got == sorted(kids, key=lambda k: spec_u(3, "layered:ChildOfSiblingOfParent", k))
    assert ids_with(out, "SiblingOfParent") == [10, 30]


def test_layer_three_counter_resets_after_layer_four_ran() -> None:
    seed = 11
    g = Graph()
    g.add(1, title="focus")
    refs: dict[int, list[int]] = {}
    for i in range(1, 6):
        obj, child = 10 * i, 10 * i + 1
        g.add(obj, title=f"object {i}")
        g.add(child, parent_id=1, sibling_order=i, target_id=obj, title=f":likes {i}")
        for r in (10 * i + 2, 10 * i + 3):
            g.add(r, target_id=obj, title=f":also likes {i}")
        refs[obj] = sorted(
            (child, 10 * i + 2, 10 * i + 3),
            key=lambda k: spec_u(seed, "layered:InboundReferenceToObjectOfReifiedChild", k),
        )
    s1, s2, s3, s4, s5 = (refs[o] for o in (10, 20, 30, 40, 50))
    # layer 2 takes 3 link children -> layer 3 takes 2 objects -> layer 4 runs dry (its counter
    # never resets: after 2 notes each pass stops at its first) -> layer 3's counter resets, it
    # takes object 3 -> ...; later layer 3 takes objects 4 and 5 in one pass before layer 4 runs
    offered = [11, 21, 31, 10, 20, s1[0], s2[0], s1[1], s1[2], s2[1], s2[2], 30, *s3,
               41, 51, 40, 50, *s4, *s5]
    expected = list(dict.fromkeys(offered))  # duplicates (the link children) are not re-added
    out = lay(g, 1, seed=seed)
    assert [i for i, _ in rels(out)] == expected
    relation = dict(rels(out))
    assert {relation[o] for o in (10, 20, 30, 40, 50)} == {"ObjectOfReifiedChild"}
    assert {relation[c] for c in (11, 21, 31, 41, 51)} == {"Child"}
    assert relation[12] == "InboundReferenceToObjectOfReifiedChild"


# -- duplicates and the focus --------------------------------------------------------------------------
def test_duplicate_keeps_first_relation_but_still_adds_to_focus_lists() -> None:
    g = Graph()
    g.add(1, title="subject")
    g.add(2, parent_id=1, target_id=3, title=":owns")  # focus: a link to its own child
    g.add(3, parent_id=2, title="child and object")
    out = lay(g, 2)
    relation = dict(rels(out))
    assert relation[3] == "Object"
    assert [i for i, _ in rels(out)].count(3) == 1
    assert doc(out)["focusNote"]["children"] == ["/n3"]


def test_inbound_duplicate_is_listed_in_inbound_references() -> None:
    g = Graph()
    g.add(1, title="focus")
    g.add(2, parent_id=1, target_id=1, title=":self reference")  # child link pointing back
    out = lay(g, 1)
    focus = doc(out)["focusNote"]
    assert dict(rels(out))[2] == "Child"
    assert focus["children"] == ["/n2"]
    assert focus["inboundReferences"] == ["/n2"]


def test_focus_can_be_related_when_it_is_its_targets_ancestor() -> None:
    g = Graph()
    g.add(1, title="subject")
    g.add(2, parent_id=1, target_id=3, title=":owns")
    g.add(3, parent_id=2, title="child and object")
    out = lay(g, 2)
    assert rels(out) == [
        (1, "Parent"),
        (3, "Object"),
        (2, "AncestorInObjectContextualPath"),
    ]
    assert "/n2" in [n["uri"] for n in doc(out)["relatedNotes"]]


def test_reified_child_and_inbound_follow_ups() -> None:
    g = Graph()
    g.add(1, title="focus")
    g.add(2, title="elsewhere")
    g.add(3, parent_id=1, target_id=2, title=":likes")
    g.add(4, title="subject")
    g.add(5, parent_id=4, target_id=1, title=":uses")
    g.add(6, parent_id=4, title="subject's other child")
    g.add(7, target_id=2, title=":also likes")
    relation = dict(rels(lay(g, 1)))
    assert relation == {
        3: "Child",
        5: "InboundReference",
        2: "ObjectOfReifiedChild",
        4: "SubjectOfInboundReference",
        6: "SiblingOfSubjectOfInboundReference",
        7: "InboundReferenceToObjectOfReifiedChild",
    }


# -- deleted notes -------------------------------------------------------------------------------------
def test_deleted_notes_are_excluded() -> None:
    g = Graph()
    g.add(1, title="parent")
    g.add(2, parent_id=1, title="focus")
    g.add(3, parent_id=1, deleted=True)
    g.add(4, parent_id=1)
    g.add(5, parent_id=2, deleted=True)
    g.add(6, parent_id=2)
    g.add(7, title="subject")
    g.add(8, parent_id=7, target_id=2, deleted=True)
    g.add(9, parent_id=7, target_id=2)
    relation = dict(rels(lay(g, 2)))
    assert relation == {
        1: "Parent",
        4: "YoungerSibling",
        6: "Child",
        9: "InboundReference",
        7: "SubjectOfInboundReference",
    }


def test_deleted_parent_makes_the_focus_a_root() -> None:
    g = Graph()
    g.add(1, title="grandparent")
    g.add(2, parent_id=1, deleted=True)
    g.add(3, parent_id=2, title="focus")
    g.add(4, parent_id=2)
    g.add(5, parent_id=3)
    out = lay(g, 3)
    assert rels(out) == [(5, "Child")]
    assert doc(out)["focusNote"]["contextualPath"] == []


def test_deleted_target_is_not_an_object() -> None:
    g = Graph()
    g.add(1, title="subject")
    g.add(2, deleted=True)
    g.add(3, parent_id=1, target_id=2, title=":was")
    assert rels(lay(g, 3)) == [(1, "Parent")]


def test_deleted_or_missing_focus_is_not_found() -> None:
    g = Graph()
    g.add(1, deleted=True)
    g.add(2, parent_id=1)
    for focus in (1, 99):
        with pytest.raises(graphrag.NoteNotFound):
            lay(g, focus)


# -- budgets and determinism ---------------------------------------------------------------------------
@pytest.mark.parametrize("limit", [0, 1, 5])
def test_no_room_gives_empty_related_notes(limit: int) -> None:
    g = Graph()
    g.add(1, title="parent")
    g.add(2, parent_id=1, title="focus")
    g.add(3, parent_id=2)
    out = doc(lay(g, 2, token_limit=limit))
    assert out["relatedNotes"] == []
    assert out["focusNote"]["children"] == []


def inbound_hub() -> Graph:
    g = Graph()
    g.add(1, title="hub")
    for r in range(100, 112):
        g.add(r, target_id=1, title=f":cites {r}")
    return g


@pytest.mark.parametrize("seed", [0, 1, 2, 99])
def test_inbound_references_come_in_seeded_random_order(seed: int) -> None:
    out = lay(inbound_hub(), 1, seed=seed)
    expected = sorted(range(100, 112), key=lambda r: spec_u(seed, "layered:InboundReference", r))
    assert ids_with(out, "InboundReference") == expected
    assert doc(out)["focusNote"]["inboundReferences"] == uris(expected)


def test_same_seed_same_bytes_and_seeds_differ() -> None:
    g = inbound_hub()
    assert lay(g, 1, seed=5).to_json() == lay(g, 1, seed=5).to_json()
    assert len({lay(g, 1, seed=s).to_json() for s in range(5)}) > 1


# -- memory ------------------------------------------------------------------------------------------
def test_finished_runs_are_freed_at_once_not_left_to_the_cycle_collector() -> None:
    """A run's handlers close over the run. Every run drops them when it ends, so a batch's dead
    runs never pile up for a full collection (once a third of its time)."""
    from graphrag.tree import layered as module

    g = Graph()
    g.add(1, title="root")
    for parent in (2, 3, 4):
        g.add(parent, parent_id=1)
        for child in range(10 * parent, 10 * parent + 8):
            g.add(child, parent_id=parent, target_id=20 if child != 20 else None)
    gc.collect()
    gc.disable()
    try:
        out = lay(g, 21)
        alive = [o for o in gc.get_objects() if isinstance(o, module._Run)]
    finally:
        gc.enable()
    assert len(out.picks) > 10 and alive == []


def test_a_step_stopped_by_an_unloaded_row_registers_its_follow_ups_once() -> None:
    """The children are link notes: a child's step registers its target's handler, then stops on
    the child's unloaded row; run again, it must not register it twice (a second handler would
    count as processed in layer three and hand layer four its turn early)."""
    g = Graph()
    g.add(1, title="focus")
    g.add(500, title="elsewhere")
    for i in range(2, 40):
        g.add(100 + i, title=f"target {i}")
        g.add(i, parent_id=1, target_id=100 + i, title=f":link {i}")
        g.add(200 + i, parent_id=500, target_id=100 + i, title=f":other {i}")
    loaded = compute_preloaded(g, graphrag.Request(1, 0, BIG, NOW_MS), "layered")
    assert isinstance(loaded, graphrag.Outcome) and rels(lay(g, 1)) == rels(loaded)
