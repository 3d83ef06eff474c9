"""Which snapshots an edit of the 2025 note tree affects (docs/algorithms.md, "Which snapshots an
edit affects"; docs/redis.md, "The edit race").

For an event on note X: X itself; every focus in ``dep:X``; X's parent and target now and before;
and X's nearest siblings (``sibling_radius`` on each side, in sibling order), whose nearest-sibling
picks X can change. A delete or restore changes X's whole subtree and the link notes pointing into it
(Doughnut stamps them together), so those count as edited too, and so do the link notes pointing at
those links, whose object goes and comes back with them (``NoteSource.edit_scope``). Edited notes
are stamped with the next edit sequence number *before* their reverse index is read, which closes
the race with a rebuild that read them just before the edit (the rebuild re-checks the stamps after
writing).

A move (a new parent or a new target) also affects the same scope below the moved note, without
stamping it (those rows did not change). Its descendants' paths changed, and those with snapshots
are in ``dep:X`` already; the walk reaches the ones that have none, which matters when a restore's
event runs after the tree moved on. The restore's event finds what came back by walking down from
its root *when it runs*; a note restored with the subtree whose ancestor (or, for a link note pointing
into the subtree, whose target) moved out before then is not below the root any more. If that note
had no snapshot (created and deleted before any drain built it) it is in no reverse index either,
and only the move's walk, which runs after the move and so after the restore, can find it. A link
note pointing at a restored link that was relinked away is found the same way, as a referrer of the
relinked note.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from graphrag import GraphView, Need, Skeleton
from service.note_event import NoteEvent
from service.ports import NoteSource, SnapshotCache

__all__ = ["CLOSE_LIMIT", "affected_foci"]

_SUBTREE_TYPES = frozenset({"note.deleted", "note.restored"})
_MOVE_TYPE = "note.moved"
#: An edited note with more children (or referring link notes) than this is a hub: its children's
#: snapshots wait in the wide lane, so that one hub edit cannot fill the urgent lane.
CLOSE_LIMIT = 32


def _load(notes: NoteSource, view: GraphView, need: Need) -> None:
    with notes.batch() as load:
        load(view, need)


def _near(notes: NoteSource, view: GraphView, parent: int, note: Skeleton, radius: int) -> list[int]:
    """Up to ``radius`` siblings on each side of where ``note`` sits (or sat) in sibling order."""
    siblings = view.children(parent)
    if note.id in siblings:
        at = siblings.index(note.id)
        return [*siblings[max(0, at - radius) : at], *siblings[at + 1 : at + 1 + radius]]
    _load(notes, view, Need(notes=frozenset(siblings)))  # gone from the list: find where it sat
    keys = [s.order_key for s in (view.note(i) for i in siblings) if s is not None]
    at = bisect_left(keys, note.order_key)
    return [*siblings[max(0, at - radius) : at], *siblings[at : at + radius]]


def _neighbours(notes: NoteSource, edited: set[int], events: Sequence[NoteEvent],
                radius: int) -> tuple[set[int], set[int], set[int]]:
    """(the parents and targets the edited notes name, their nearby siblings, their children and
    referring link notes where they have at most :data:`CLOSE_LIMIT` of each)."""
    view = GraphView()
    _load(notes, view, Need(notes=frozenset(edited)))
    skeletons = [s for s in (view.note(i) for i in edited) if s is not None]
    refs = {r for s in skeletons for r in (s.parent_id, s.target_id) if r is not None}
    refs |= {r for e in events for r in e.mentioned()}
    parents = {p for p in (s.parent_id for s in skeletons) if p is not None}
    parents |= {e.before_parent_id for e in events if e.before_parent_id is not None}
    _load(notes, view, Need(children=frozenset(parents | edited), inbound=frozenset(edited)))
    near: set[int] = set()
    for s in skeletons:
        for p in {s.parent_id, *_old_parents(events, s.id)} - {None}:
            near.update(_near(notes, view, p, s, radius))  # type: ignore[arg-type]
    return refs, near, _close(view, edited)


def _close(view: GraphView, edited: set[int]) -> set[int]:
    """The children and referring link notes of each edited note, unless it is a hub's (more than
    :data:`CLOSE_LIMIT`): their snapshots show the note first, as their parent or target."""
    close: set[int] = set()
    for note_id in edited:
        for ids in (view.children(note_id), view.inbound(note_id)):
            if len(ids) <= CLOSE_LIMIT:
                close.update(ids)
    return close


def _old_parents(events: Sequence[NoteEvent], note_id: int) -> list[int]:
    return [e.before_parent_id for e in events
            if e.note_id == note_id and e.before_parent_id is not None]


def _moves(event: NoteEvent) -> bool:
    """Whether ``event`` gives its note a new parent or target (change capture reports both as a
    move; a webhook may report a relink as an update that names both targets)."""
    if event.type == _MOVE_TYPE:
        return True
    return any(before != after and (before, after) != (None, None) for before, after in (
        (event.before_parent_id, event.after_parent_id),
        (event.before_target_id, event.after_target_id)))


def affected_foci(events: Sequence[NoteEvent], notes: NoteSource, snapshots: SnapshotCache, *,
                  sibling_radius: int) -> tuple[set[int], set[int]]:
    """(urgent foci, every focus whose snapshots the events can change); stamps the edited notes.

    The urgent ones are the edited notes, the parents and targets they name (before and after),
    and — unless there are more than :data:`CLOSE_LIMIT` — their children and the link notes
    pointing at them: the snapshots that show an edited note first, rebuilt in a batch of their own
    before the rest (docs/architecture.md, "Draining").
    """
    events = [e for e in events if e.note_id is not None]  # the tree has only note events
    edited = {e.note_id for e in events if e.note_id is not None}
    changed_subtrees = {e.note_id for e in events if e.type in _SUBTREE_TYPES and e.note_id is not None}
    if changed_subtrees:
        edited |= notes.edit_scope(changed_subtrees)
    moved = {e.note_id for e in events if _moves(e) and e.note_id is not None}
    below = notes.edit_scope(moved) if moved else set()  # affected, not edited (module docstring)
    snapshots.stamp_touched(edited)  # before reading dep:X (see the module docstring)
    refs, near, close = _neighbours(notes, edited, events, sibling_radius)
    dependents = snapshots.dependents(edited)
    return edited | refs | (close & dependents), edited | refs | near | dependents | below
