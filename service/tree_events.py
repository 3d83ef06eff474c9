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

A move (a new parent or a new target) changes the paths below the moved note, and those snapshots
are in ``dep:X`` already; but it also reaches the same scope below X as a delete or restore would
(``NoteSource.edit_scope``: the subtree, the links into it, the links to those) and handles it as a
restore's walk handles what it finds: stamped, with the parents, targets, nearest siblings and
dependents of those notes, never urgent. This is for a restore whose event runs after the tree
moved on. The restore's event finds what came back by walking down from its root *when it runs*;
a note restored with the subtree whose ancestor (or, for a link pointing into the subtree, whose
target) moved out before then is not below the root any more, and neither are the links to it. A
note without a snapshot (created and deleted before any drain built it) is in no reverse index,
and the snapshots that show a link whose object came back (shown without it) are found only
through that link, which the walk no longer reaches: without this, nothing would ever rebuild
them. The *last* move that changed such a note's path is committed after the restore and its
event runs after that move, when the note is still below the moved one, so its walk reaches it. A
relink is a move of the link note, so a link pointing at a restored link that was relinked away is
reached the same way.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Sequence

from graphrag import GraphView, Need, Skeleton
from service.note_event import NoteEvent
from service.ports import NoteSource, SnapshotCache

__all__ = ["CLOSE_LIMIT", "SCOPE_LIMIT", "affected_foci"]

log = logging.getLogger("graphrag.events")

_SUBTREE_TYPES = frozenset({"note.deleted", "note.restored"})
_MOVE_TYPE = "note.moved"
_NOT_MOVES = _SUBTREE_TYPES | {"note.created"}  # a new note has nothing below it yet
#: The most notes one edit's subtree scope walks (a delete, restore or move of a bigger subtree).
SCOPE_LIMIT = 10_000
#: An edited note with more children (or referring link notes) than this is a hub: its children's
#: snapshots wait behind the urgent lane, so that one hub edit cannot fill it; so do the nearest
#: siblings of edited notes when the events have more of them than this.
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
    """Whether ``event`` may give its note a new parent or target: a known change of either (change
    capture reports both as a move; a webhook may report a relink as an update naming both
    targets), or a move whose old or new parent the sender did not say. A reorder among the same
    siblings changes no path below the note."""
    if event.type in _NOT_MOVES:
        return False
    parent_known = None not in (event.before_parent_id, event.after_parent_id)
    target_known = None not in (event.before_target_id, event.after_target_id)
    return ((parent_known and event.before_parent_id != event.after_parent_id)
            or (target_known and event.before_target_id != event.after_target_id)
            or (event.type == _MOVE_TYPE and not parent_known))


def _scope(notes: NoteSource, roots: set[int]) -> set[int]:
    """``NoteSource.edit_scope`` of ``roots``; a scope cut at :data:`SCOPE_LIMIT` is logged (what lies
    deeper is left to the reverse index and the nightly rebuild)."""
    found = notes.edit_scope(roots, limit=SCOPE_LIMIT)
    if len(found) >= SCOPE_LIMIT:
        log.warning("the edit of notes %s reaches %d or more notes; deeper ones are left to their "
                    "reverse index and the nightly rebuild", sorted(roots)[:10], SCOPE_LIMIT)
    return found


def _around(notes: NoteSource, snapshots: SnapshotCache, below: set[int], radius: int) -> set[int]:
    """The foci a restore's walk adds for ``below`` had it reached them: the notes themselves, the
    parents and targets they name, their nearest siblings, and every focus whose snapshots show
    one of them (read after they were stamped)."""
    refs, near, _ = _neighbours(notes, below, (), radius)
    return below | refs | near | snapshots.dependents(below)


def affected_foci(events: Sequence[NoteEvent], notes: NoteSource, snapshots: SnapshotCache, *,
                  sibling_radius: int) -> tuple[set[int], set[int]]:
    """(urgent foci, every focus whose snapshots the events can change); stamps the edited notes
    and the scope below moved ones.

    The urgent ones are the edited notes, the parents and targets they name (before and after),
    and, among the foci whose snapshots show an edited note, its children and the link notes
    pointing at it (unless a note has more than :data:`CLOSE_LIMIT` of either) and its nearest
    siblings (unless the events have more than :data:`CLOSE_LIMIT` of them): the snapshots that
    show an edited note first, rebuilt in a batch of their own before the rest
    (docs/architecture.md, "Draining"). What a move reaches below the moved note is never urgent.
    """
    events = [e for e in events if e.note_id is not None]  # the tree has only note events
    edited = {e.note_id for e in events if e.note_id is not None}
    changed_subtrees = {e.note_id for e in events if e.type in _SUBTREE_TYPES and e.note_id is not None}
    if changed_subtrees:
        edited |= _scope(notes, changed_subtrees)
    moved = {e.note_id for e in events if _moves(e) and e.note_id is not None}
    below = _scope(notes, moved) - edited if moved else set()
    snapshots.stamp_touched(edited | below)  # before reading dep:X (see the module docstring)
    refs, near, close = _neighbours(notes, edited, events, sibling_radius)
    dependents = snapshots.dependents(edited)
    around = _around(notes, snapshots, below, sibling_radius) if below else set()
    shown_first = close | (near if len(near) <= CLOSE_LIMIT else set())
    return edited | refs | (shown_first & dependents), edited | refs | near | dependents | around
