"""Discovery paths, the labels they read as, label priority and relevance weights (docs/algorithms.md).

A path is a string over the edge alphabet P (parent), C (child), O (object = target) and
I (inbound: a link note whose target is the previous note), e.g. ``"PPC"`` for a sibling of the parent.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from graphrag.tree.model import Relation as R

__all__ = ["PRIORITY", "WEIGHTS", "label_of_path", "priority"]

# Anchored patterns, tried in order; "PC" is resolved by sibling order in label_of_path.
_PATTERNS: tuple[tuple[re.Pattern[str], R], ...] = tuple(
    (re.compile(rf"\A{pattern}\Z"), label)
    for pattern, label in (
        ("", R.SELF),
        ("P", R.PARENT),
        ("C", R.CHILD),
        ("O", R.OBJECT),
        ("I", R.INBOUND_REFERENCE),
        ("CO", R.OBJECT_OF_REIFIED_CHILD),
        ("IP", R.SUBJECT_OF_INBOUND_REFERENCE),
        ("PPP*", R.ANCESTOR_IN_CONTEXTUAL_PATH),
        ("OPP*", R.ANCESTOR_IN_OBJECT_CONTEXTUAL_PATH),
        ("PPC", R.SIBLING_OF_PARENT),
        ("OPPC", R.SIBLING_OF_PARENT_OF_OBJECT),
        ("PPCC", R.CHILD_OF_SIBLING_OF_PARENT),
        ("OPPCC", R.CHILD_OF_SIBLING_OF_PARENT_OF_OBJECT),
        ("IPPP*", R.INBOUND_REFERENCE_CONTEXTUAL_PATH),
        ("IPC", R.SIBLING_OF_SUBJECT_OF_INBOUND_REFERENCE),
        ("COI", R.INBOUND_REFERENCE_TO_OBJECT_OF_REIFIED_CHILD),
        ("CCC*", R.GRAND_CHILD),
    )
)

#: docs/algorithms.md, highest first: the shorter path wins, and among equally long paths this order.
PRIORITY: tuple[R, ...] = (
    R.SELF,
    R.PARENT,
    R.CHILD,
    R.OBJECT,
    R.INBOUND_REFERENCE,
    R.PRIOR_SIBLING,
    R.YOUNGER_SIBLING,
    R.OBJECT_OF_REIFIED_CHILD,
    R.SUBJECT_OF_INBOUND_REFERENCE,
    R.ANCESTOR_IN_CONTEXTUAL_PATH,
    R.ANCESTOR_IN_OBJECT_CONTEXTUAL_PATH,
    R.SIBLING_OF_PARENT,
    R.SIBLING_OF_PARENT_OF_OBJECT,
    R.CHILD_OF_SIBLING_OF_PARENT,
    R.CHILD_OF_SIBLING_OF_PARENT_OF_OBJECT,
    R.INBOUND_REFERENCE_CONTEXTUAL_PATH,
    R.SIBLING_OF_SUBJECT_OF_INBOUND_REFERENCE,
    R.INBOUND_REFERENCE_TO_OBJECT_OF_REIFIED_CHILD,
    R.GRAND_CHILD,
    R.REMOTELY_RELATED,
)
_RANK: Mapping[R, int] = {label: rank for rank, label in enumerate(PRIORITY)}

_CORE = (
    R.PARENT,
    R.CHILD,
    R.OBJECT,
    R.OBJECT_OF_REIFIED_CHILD,
    R.INBOUND_REFERENCE,
    R.SUBJECT_OF_INBOUND_REFERENCE,
)
_REMOTE = (R.GRAND_CHILD, R.REMOTELY_RELATED)

#: the design relationship weights; InboundReferenceToObjectOfReifiedChild is 5.0 (Doughnut's).
WEIGHTS: Mapping[R, float] = {
    label: 10.0 if label in _CORE else 2.0 if label in _REMOTE else 5.0
    for label in PRIORITY
    if label is not R.SELF
}


def priority(label: R) -> int:
    """Rank of a label, 0 highest."""
    return _RANK[label]


def label_of_path(path: str, *, after_focus: bool | None = None) -> R:
    """The relation a discovery path reads as.

    ``after_focus`` decides ``"PC"``: true for a note after the focus in sibling order (younger),
    false for one before it (prior). It is ignored for every other path.
    """
    if path == "PC":
        return R.YOUNGER_SIBLING if after_focus else R.PRIOR_SIBLING
    return _label_of(path)


@functools.lru_cache(maxsize=4096)
def _label_of(path: str) -> R:
    """The first matching pattern's label; memoised: a batch asks for the same few paths often."""
    for pattern, label in _PATTERNS:
        if pattern.match(path):
            return label
    return R.REMOTELY_RELATED
