"""Note-edit events and the snapshots they affect (DESIGN §4, §5).

For an event on note X: X itself; every focus in ``dep:X``; X's parent and target now and before;
and X's nearest siblings (``sibling_radius`` on each side, in sibling order), whose nearest-sibling
picks X can change. A delete or restore changes X's whole subtree and the link notes pointing into it
(Doughnut stamps them together), so those count as edited too. Edited notes are stamped with the next
edit sequence number *before* their reverse index is read, which closes the race with a rebuild that
read them just before the edit (the rebuild re-checks the stamps after writing).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphrag import GraphView, Need, Skeleton
from storage.dirty import DirtySet
from storage.snapshots import SnapshotStore
from storage.sql import NoteStore

__all__ = ["EVENT_TYPES", "NoteEvent", "affected_foci", "record_events"]

EVENT_TYPES = ("note.created", "note.updated", "note.moved", "note.deleted", "note.restored")
_SUBTREE_TYPES = frozenset({"note.deleted", "note.restored"})


@dataclass(frozen=True, slots=True)
class NoteEvent:
    """One change Doughnut reports; ``before_*`` are known only when the sender says."""

    type: str
    note_id: int
    before_parent_id: int | None = None
    before_target_id: int | None = None
    after_parent_id: int | None = None
    after_target_id: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NoteEvent:
        """From the validated webhook payload shape (``noteId``, ``before``/``after``)."""
        before, after = data.get("before") or {}, data.get("after") or {}
        return cls(data["type"], int(data["noteId"]), before.get("parentId"),
                   before.get("targetNoteId"), after.get("parentId"), after.get("targetNoteId"))

    def mentioned(self) -> set[int]:
        refs = (self.before_parent_id, self.before_target_id, self.after_parent_id,
                self.after_target_id)
        return {r for r in refs if r is not None}


def _near(notes: NoteStore, view: GraphView, parent: int, note: Skeleton, radius: int) -> list[int]:
    """Up to ``radius`` siblings on each side of where ``note`` sits (or sat) in sibling order."""
    siblings = view.children(parent)
    if note.id in siblings:
        at = siblings.index(note.id)
        return [*siblings[max(0, at - radius) : at], *siblings[at + 1 : at + 1 + radius]]
    notes.load(view, Need(notes=frozenset(siblings)))  # gone from the list: find where it sat
    keys = [s.order_key for s in (view.note(i) for i in siblings) if s is not None]
    at = bisect_left(keys, note.order_key)
    return [*siblings[max(0, at - radius) : at], *siblings[at : at + radius]]


def _neighbours(notes: NoteStore, edited: set[int], events: Sequence[NoteEvent],
                radius: int) -> set[int]:
    view = GraphView()
    notes.load(view, Need(notes=frozenset(edited)))
    skeletons = [s for s in (view.note(i) for i in edited) if s is not None]
    refs = {r for s in skeletons for r in (s.parent_id, s.target_id) if r is not None}
    refs |= {r for e in events for r in e.mentioned()}
    parents = {p for p in (s.parent_id for s in skeletons) if p is not None}
    parents |= {e.before_parent_id for e in events if e.before_parent_id is not None}
    notes.load(view, Need(children=frozenset(parents)))
    near: set[int] = set()
    for s in skeletons:
        for p in {s.parent_id, *_old_parents(events, s.id)} - {None}:
            near.update(_near(notes, view, p, s, radius))  # type: ignore[arg-type]
    return refs | near


def _old_parents(events: Sequence[NoteEvent], note_id: int) -> list[int]:
    return [e.before_parent_id for e in events
            if e.note_id == note_id and e.before_parent_id is not None]


def affected_foci(events: Sequence[NoteEvent], notes: NoteStore, snapshots: SnapshotStore, *,
                  sibling_radius: int) -> tuple[set[int], set[int]]:
    """(edited notes, focus ids whose snapshots the events can change); stamps the edited notes."""
    edited = {e.note_id for e in events}
    changed_subtrees = {e.note_id for e in events if e.type in _SUBTREE_TYPES}
    if changed_subtrees:
        edited |= notes.subtree_and_referrers(changed_subtrees)
    snapshots.stamp_touched(edited)  # before reading dep:X (see the module docstring)
    affected = edited | snapshots.dependents_many(edited)
    affected |= _neighbours(notes, edited, events, sibling_radius)
    return edited, affected


def record_events(events: Sequence[NoteEvent], notes: NoteStore, snapshots: SnapshotStore,
                  dirty: DirtySet, *, sibling_radius: int, now_ms: int) -> set[int]:
    """Resolve, bump generations and mark dirty; returns the affected focus ids."""
    _, affected = affected_foci(events, notes, snapshots, sibling_radius=sibling_radius)
    snapshots.bump_generation(affected)
    dirty.add(affected, now_ms=now_ms)
    return affected

