"""Discovery path -> label table, label priority and weights (docs/algorithms.md, docs/algorithms.md)."""

from __future__ import annotations

import itertools

import pytest

from graphrag.tree.labels import PRIORITY, WEIGHTS, label_of_path, priority
from graphrag.tree.model import Relation as R


@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("", R.SELF),
        ("P", R.PARENT),
        ("C", R.CHILD),
        ("O", R.OBJECT),
        ("I", R.INBOUND_REFERENCE),
        ("CO", R.OBJECT_OF_REIFIED_CHILD),
        ("IP", R.SUBJECT_OF_INBOUND_REFERENCE),
        ("PP", R.ANCESTOR_IN_CONTEXTUAL_PATH),
        ("PPP", R.ANCESTOR_IN_CONTEXTUAL_PATH),
        ("PPPPPP", R.ANCESTOR_IN_CONTEXTUAL_PATH),
        ("OP", R.ANCESTOR_IN_OBJECT_CONTEXTUAL_PATH),
        ("OPP", R.ANCESTOR_IN_OBJECT_CONTEXTUAL_PATH),
        ("OPPPP", R.ANCESTOR_IN_OBJECT_CONTEXTUAL_PATH),
        ("PPC", R.SIBLING_OF_PARENT),
        ("OPPC", R.SIBLING_OF_PARENT_OF_OBJECT),
        ("PPCC", R.CHILD_OF_SIBLING_OF_PARENT),
        ("OPPCC", R.CHILD_OF_SIBLING_OF_PARENT_OF_OBJECT),
        ("IPP", R.INBOUND_REFERENCE_CONTEXTUAL_PATH),
        ("IPPPP", R.INBOUND_REFERENCE_CONTEXTUAL_PATH),
        ("IPC", R.SIBLING_OF_SUBJECT_OF_INBOUND_REFERENCE),
        ("COI", R.INBOUND_REFERENCE_TO_OBJECT_OF_REIFIED_CHILD),
        ("CC", R.GRAND_CHILD),
        ("CCC", R.GRAND_CHILD),
        ("CCCCC", R.GRAND_CHILD),
    ],
)
def test_path_table(path: str, label: R) -> None:
    assert label_of_path(path) is label


@pytest.mark.parametrize(
    "path",
    ["PO", "OO", "II", "IC", "CI", "OC", "OI", "PI", "CP", "PCC", "PCP", "PPCCC", "IPCC", "COO",
     "COIP", "CCO", "CCP", "OPPCCC", "PPCP", "IPO", "CPC"],
)
def test_other_paths_are_remotely_related(path: str) -> None:
    assert label_of_path(path) is R.REMOTELY_RELATED


def test_parent_child_path_is_prior_or_younger_by_position() -> None:
    assert label_of_path("PC", after_focus=True) is R.YOUNGER_SIBLING
    assert label_of_path("PC", after_focus=False) is R.PRIOR_SIBLING


def test_after_focus_is_ignored_for_other_paths() -> None:
    for path in ("P", "C", "PPC", "CC"):
        assert label_of_path(path, after_focus=True) is label_of_path(path, after_focus=False)


def test_priority_lists_every_relation_once_self_first() -> None:
    assert sorted(PRIORITY) == sorted(R)
    assert len(set(PRIORITY)) == len(PRIORITY)
    assert priority(R.SELF) == 0


def test_priority_follows_seed_000_groups() -> None:
    # docs/algorithms.md: direct > one-hop derived > two-hop derived > three-hop and beyond
    direct = [R.PARENT, R.CHILD, R.OBJECT, R.INBOUND_REFERENCE]
    one_hop = [R.PRIOR_SIBLING, R.YOUNGER_SIBLING, R.OBJECT_OF_REIFIED_CHILD,
               R.SUBJECT_OF_INBOUND_REFERENCE]
    two_hop = [R.ANCESTOR_IN_CONTEXTUAL_PATH, R.ANCESTOR_IN_OBJECT_CONTEXTUAL_PATH,
               R.SIBLING_OF_PARENT, R.SIBLING_OF_PARENT_OF_OBJECT, R.CHILD_OF_SIBLING_OF_PARENT,
               R.CHILD_OF_SIBLING_OF_PARENT_OF_OBJECT, R.INBOUND_REFERENCE_CONTEXTUAL_PATH,
               R.SIBLING_OF_SUBJECT_OF_INBOUND_REFERENCE,
               R.INBOUND_REFERENCE_TO_OBJECT_OF_REIFIED_CHILD]
    beyond = [R.GRAND_CHILD, R.REMOTELY_RELATED]
    groups = [direct, one_hop, two_hop, beyond]
    for higher, lower in itertools.pairwise(groups):
        assert max(map(priority, higher)) < min(map(priority, lower))
    # within the direct group, the order the design lists
    assert [priority(r) for r in direct] == sorted(priority(r) for r in direct)
    assert priority(R.SUBJECT_OF_INBOUND_REFERENCE) < priority(R.ANCESTOR_IN_CONTEXTUAL_PATH)


def test_weights_follow_seed_000_table() -> None:
    core = {R.PARENT, R.CHILD, R.OBJECT, R.OBJECT_OF_REIFIED_CHILD, R.INBOUND_REFERENCE,
            R.SUBJECT_OF_INBOUND_REFERENCE}
    remote = {R.GRAND_CHILD, R.REMOTELY_RELATED}
    assert R.SELF not in WEIGHTS
    assert set(WEIGHTS) == set(R) - {R.SELF}
    for label, weight in WEIGHTS.items():
        expected = 10.0 if label in core else 2.0 if label in remote else 5.0
        assert weight == expected, label
    # docs/algorithms.md: omitted by the design, weighs 5.0 (Doughnut's value)
    assert WEIGHTS[R.INBOUND_REFERENCE_TO_OBJECT_OF_REIFIED_CHILD] == 5.0


def test_relation_spellings_are_doughnuts() -> None:
    expected = [
        "Self", "Parent", "Object", "Child", "PriorSibling", "YoungerSibling", "InboundReference",
        "SubjectOfInboundReference", "AncestorInContextualPath", "AncestorInObjectContextualPath",
        "ObjectOfReifiedChild", "SiblingOfParent", "SiblingOfParentOfObject",
        "ChildOfSiblingOfParent", "ChildOfSiblingOfParentOfObject",
        "InboundReferenceContextualPath", "SiblingOfSubjectOfInboundReference",
        "InboundReferenceToObjectOfReifiedChild", "RemotelyRelated", "GrandChild",
    ]
    assert sorted(r.value for r in R) == sorted(expected)
