"""Plain data the algorithms work on: note skeletons, rendered rows, data needs, relations.

A *skeleton* is the integer shape of a note (ids, order, deleted flag) and is cheap to load in bulk;
a *row* adds what is rendered (title, details, creation time, titles of parent and target) and is loaded
only for notes that can be shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Need", "Ref", "Relation", "Row", "Skeleton"]


class Relation(StrEnum):
    """``relationToFocusNote`` values, spelled exactly as Doughnut spells them."""

    SELF = "Self"
    PARENT = "Parent"
    OBJECT = "Object"
    CHILD = "Child"
    PRIOR_SIBLING = "PriorSibling"
    YOUNGER_SIBLING = "YoungerSibling"
    INBOUND_REFERENCE = "InboundReference"
    SUBJECT_OF_INBOUND_REFERENCE = "SubjectOfInboundReference"
    ANCESTOR_IN_CONTEXTUAL_PATH = "AncestorInContextualPath"
    ANCESTOR_IN_OBJECT_CONTEXTUAL_PATH = "AncestorInObjectContextualPath"
    OBJECT_OF_REIFIED_CHILD = "ObjectOfReifiedChild"
    SIBLING_OF_PARENT = "SiblingOfParent"
    SIBLING_OF_PARENT_OF_OBJECT = "SiblingOfParentOfObject"
    CHILD_OF_SIBLING_OF_PARENT = "ChildOfSiblingOfParent"
    CHILD_OF_SIBLING_OF_PARENT_OF_OBJECT = "ChildOfSiblingOfParentOfObject"
    INBOUND_REFERENCE_CONTEXTUAL_PATH = "InboundReferenceContextualPath"
    SIBLING_OF_SUBJECT_OF_INBOUND_REFERENCE = "SiblingOfSubjectOfInboundReference"
    INBOUND_REFERENCE_TO_OBJECT_OF_REIFIED_CHILD = "InboundReferenceToObjectOfReifiedChild"
    GRAND_CHILD = "GrandChild"
    REMOTELY_RELATED = "RemotelyRelated"


@dataclass(frozen=True, slots=True)
class Skeleton:
    """The integer shape of one note. ``deleted`` is true when ``deleted_at`` is set."""

    id: int
    parent_id: int | None
    target_id: int | None
    sibling_order: int
    deleted: bool = False

    @property
    def order_key(self) -> tuple[int, int]:
        """Doughnut's order among siblings: (sibling_order, id)."""
        return (self.sibling_order, self.id)


@dataclass(frozen=True, slots=True)
class Ref:
    """A live note referenced by another (its parent or target): uri comes from ``id``."""

    id: int
    title: str


@dataclass(frozen=True, slots=True)
class Row:
    """What is rendered of one note. ``parent``/``target`` are None when absent or deleted."""

    id: int
    title: str
    details: str | None
    created_at_ms: int
    is_link: bool
    parent: Ref | None
    target: Ref | None


def _ids() -> frozenset[int]:
    return frozenset()


@dataclass(frozen=True, slots=True)
class Need:
    """Data an algorithm waits for, by kind; each kind is loaded with batched IN queries.

    ``notes``: skeletons by id. ``children``: live children skeletons by parent id. ``inbound``: live
    link-note skeletons by target id. ``ancestors``: skeletons of the whole parent chain from each id.
    ``rows``: rendered rows (and skeletons) by id.
    """

    notes: frozenset[int] = field(default_factory=_ids)
    children: frozenset[int] = field(default_factory=_ids)
    inbound: frozenset[int] = field(default_factory=_ids)
    ancestors: frozenset[int] = field(default_factory=_ids)
    rows: frozenset[int] = field(default_factory=_ids)

    @staticmethod
    def union(needs: Sequence[Need]) -> Need:
        """Every need of ``needs`` merged in one pass (what ``|`` does pairwise)."""
        kinds: tuple[set[int], ...] = (set(), set(), set(), set(), set())
        for need in needs:
            for into, ids in zip(kinds, (need.notes, need.children, need.inbound, need.ancestors,
                                         need.rows), strict=True):
                into |= ids
        return Need(*map(frozenset, kinds))

    def __or__(self, other: Need) -> Need:
        return Need(
            self.notes | other.notes,
            self.children | other.children,
            self.inbound | other.inbound,
            self.ancestors | other.ancestors,
            self.rows | other.rows,
        )

    def __bool__(self) -> bool:
        return bool(self.notes or self.children or self.inbound or self.ancestors or self.rows)

    def size(self) -> int:
        """How many ids the need names, all kinds together."""
        return sum(map(len, (self.notes, self.children, self.inbound, self.ancestors, self.rows)))
