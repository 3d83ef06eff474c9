"""Scenario tests of the wavefront strategy (docs/algorithms.md) on small hand-built graphs: the
label each related note gets (the shortest path wins, equal paths keep the higher-priority label) and
deleted notes, which never appear and cut the paths through them."""

from __future__ import annotations

import pytest

import graphrag
from tests.support import Graph
from tests.unit.helpers import doc, ids_with, uris
from tests.unit.wavefront_graphs import relation_of, wf


# -- labels on small graphs ------------------------------------------------------------------------
def test_parent_object_and_children_of_a_link_focus() -> None:
    g = Graph()
    g.add(1, title="subject")
    g.add(2, title="object")
    g.add(3, parent_id=1, target_id=2, title=":is like")
    g.add(4, parent_id=3, title="child a")
    g.add(5, parent_id=3, title="child b")
    out = wf(g, 3)
    assert relation_of(out) == {1: "Parent", 2: "Object", 4: "Child", 5: "Child"}
    focus = doc(out)["focusNote"]
    assert focus["subjectUriAndTitle"] == {"uri": "/n1", "title": "subject"}
    assert focus["objectUriAndTitle"] == {"uri": "/n2", "title": "object"}
    assert focus["contextualPath"] == ["/n1"]
    assert focus["children"] == [u for u in uris(ids_with(out, "Child"))]
    assert sorted(focus["children"]) == ["/n4", "/n5"]


def test_inbound_reference_and_its_subject() -> None:
    g = Graph()
    g.add(1, title="focus")
    g.add(2, title="subject")
    g.add(3, parent_id=2, target_id=1, title=":uses")
    out = wf(g, 1)
    assert relation_of(out) == {3: "InboundReference", 2: "SubjectOfInboundReference"}
    assert doc(out)["focusNote"]["inboundReferences"] == ["/n3"]


def test_ancestors_and_object_ancestors() -> None:
    g = Graph()
    g.add(1, title="root")
    g.add(2, parent_id=1)
    g.add(3, parent_id=2)
    g.add(10, title="object root")
    g.add(11, parent_id=10)
    g.add(12, parent_id=11)
    g.add(4, parent_id=3, target_id=12, title=":see")
    out = wf(g, 4)
    assert relation_of(out) == {
        3: "Parent",
        2: "AncestorInContextualPath",
        1: "AncestorInContextualPath",
        12: "Object",
        11: "AncestorInObjectContextualPath",
        10: "AncestorInObjectContextualPath",
    }
    assert doc(out)["focusNote"]["contextualPath"] == ["/n1", "/n2", "/n3"]


def test_siblings_by_sibling_order_then_id_with_ties_and_negatives() -> None:
    g = Graph()
    g.add(1, title="parent")
    g.add(40, parent_id=1, sibling_order=-5)
    g.add(20, parent_id=1, sibling_order=0)
    g.add(25, parent_id=1, sibling_order=0, title="focus")
    g.add(30, parent_id=1, sibling_order=0)
    g.add(5, parent_id=1, sibling_order=7)
    out = wf(g, 25)
    # order: (-5,40) (0,20) [(0,25) focus] (0,30) (7,5)
    assert relation_of(out) == {
        1: "Parent",
        40: "PriorSibling",
        20: "PriorSibling",
        30: "YoungerSibling",
        5: "YoungerSibling",
    }
    focus = doc(out)["focusNote"]
    assert focus["priorSiblings"] == ["/n40", "/n20"]
    assert focus["youngerSiblings"] == ["/n30", "/n5"]
    assert out.prior_siblings == (40, 20)
    assert out.younger_siblings == (30, 5)


def test_sibling_of_parent_is_nearest_to_the_parent() -> None:
    g = Graph()
    g.add(1, title="grandparent")
    for i, sib in enumerate([11, 12, 2, 13, 14, 15]):
        g.add(sib, parent_id=1, sibling_order=i)
    g.add(3, parent_id=2, title="focus")
    out = wf(g, 3)
    # grandparent enters in wave 2, so in wave 3 it gets 2 x (3 - 2) = 2 children nearest the parent
    assert relation_of(out) == {
        2: "Parent",
        1: "AncestorInContextualPath",
        12: "SiblingOfParent",
        13: "SiblingOfParent",
    }


def test_object_of_reified_child_and_grandchild() -> None:
    g = Graph()
    g.add(1, title="focus")
    g.add(2, title="elsewhere")
    g.add(3, parent_id=1, target_id=2, title=":likes")  # link child
    g.add(4, parent_id=1, title="plain child")
    g.add(5, parent_id=4, title="grandchild")
    g.add(6, parent_id=5, title="great-grandchild")
    out = wf(g, 1)
    assert relation_of(out) == {
        3: "Child",
        4: "Child",
        2: "ObjectOfReifiedChild",
        5: "GrandChild",
        6: "GrandChild",
    }


def test_equal_length_paths_keep_the_higher_priority_label() -> None:
    # 3 is the focus's grandparent (path PP) and the subject of an inbound reference (path IP):
    # both are two hops; SubjectOfInboundReference ranks above AncestorInContextualPath
    g = Graph()
    g.add(3, title="grandparent")
    g.add(2, parent_id=3, title="parent")
    g.add(1, parent_id=2, title="focus")
    g.add(4, parent_id=3, target_id=1, title=":about")
    out = wf(g, 1)
    assert relation_of(out)[3] == "SubjectOfInboundReference"
    assert relation_of(out)[2] == "Parent"
    assert relation_of(out)[4] == "InboundReference"


def test_shorter_path_wins_over_a_longer_one() -> None:
    # the focus's target is also its grandparent: Object (one hop) beats Ancestor (two hops)
    g = Graph()
    g.add(1, title="grandparent")
    g.add(2, parent_id=1)
    g.add(3, parent_id=2, target_id=1, title=":under")
    out = wf(g, 3)
    assert relation_of(out) == {2: "Parent", 1: "Object"}


# -- deleted notes -----------------------------------------------------------------------------------
def test_deleted_child_inbound_and_sibling_never_appear() -> None:
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
    g.add(10, parent_id=5)  # child of a deleted child
    out = wf(g, 2)
    assert relation_of(out) == {
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
    g.add(4, parent_id=2, title="sibling under deleted parent")
    g.add(5, parent_id=3, title="child")
    out = wf(g, 3)
    assert relation_of(out) == {5: "Child"}
    assert doc(out)["focusNote"]["contextualPath"] == []
    assert "parentUriAndTitle" not in doc(out)["focusNote"]


def test_deleted_target_is_not_an_object() -> None:
    g = Graph()
    g.add(1, title="subject")
    g.add(2, title="gone", deleted=True)
    g.add(3, parent_id=1, target_id=2, title=":was")
    out = wf(g, 3)
    assert relation_of(out) == {1: "Parent"}


def test_deleted_or_missing_focus_is_not_found() -> None:
    g = Graph()
    g.add(1, deleted=True)
    with pytest.raises(graphrag.NoteNotFound):
        wf(g, 1)
    with pytest.raises(graphrag.NoteNotFound):
        wf(g, 42)
