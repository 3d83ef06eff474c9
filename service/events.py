"""Note-edit events and the snapshots they affect (docs/algorithms.md, "Which snapshots an edit
affects"; docs/redis.md, "The edit race").

For an event on note X: X itself; every focus in ``dep:X``; X's parent and target now and before;
and X's nearest siblings (``sibling_radius`` on each side, in sibling order), whose nearest-sibling
picks X can change. A delete or restore changes X's whole subtree and the link notes pointing into it
(Doughnut stamps them together), so those count as edited too, and so do the link notes pointing at
those links, whose object goes and comes back with them (``NoteSource.edit_scope``). Edited notes
are stamped with the next edit sequence number *before* their reverse index is read, which closes
the race with a rebuild that read them just before the edit (the rebuild re-checks the stamps after
writing).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphrag import GraphView, Need, Skeleton, get_strategy
from service.ports import DirtyQueue, NoteSource, SnapshotCache

__all__ = ["EVENT_TYPES", "NoteEvent", "affected_foci", "outdate_shown", "record_events",
           "sibling_radius"]

EVENT_TYPES = (
    "note.created", "note.updated", "note.moved", "note.deleted", "note.restored",
    "folder.created", "folder.renamed", "folder.moved", "folder.deleted",
    "notebook.created", "notebook.renamed", "notebook.deleted", "notebook.access",
)
#: The id field each kind of event names its subject with.
SUBJECTS = {"note": "noteId", "folder": "folderId", "notebook": "notebookId"}
_SUBTREE_TYPES = frozenset({"note.deleted", "note.restored"})
#: An edited note with more children (or referring link notes) than this is a hub: its children's
#: snapshots wait in the wide lane, so that one hub edit cannot fill the urgent lane.
CLOSE_LIMIT = 32


def _ids(values: Any) -> tuple[int, ...] | None:
    return None if values is None else tuple(int(v) for v in values)


@dataclass(frozen=True, slots=True)
class NoteEvent:
    """One change Doughnut reports; ``before_*``/``after_*`` are known only when the sender says.

    Note events carry ``note_id`` and, on the 2025 tree, the parent and target around the change;
    on 2026's wiki model the folder, notebook and resolved link targets. Folder and notebook events
    (2026) carry ``folder_id`` or ``notebook_id`` instead (``note_id`` is then None).
    """

    type: str
    note_id: int | None
    before_parent_id: int | None = None
    before_target_id: int | None = None
    after_parent_id: int | None = None
    after_target_id: int | None = None
    folder_id: int | None = None
    notebook_id: int | None = None
    before_folder_id: int | None = None
    after_folder_id: int | None = None
    before_notebook_id: int | None = None
    after_notebook_id: int | None = None
    before_links: tuple[int, ...] | None = None
    after_links: tuple[int, ...] | None = None
    before_parent_folder_id: int | None = None
    after_parent_folder_id: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NoteEvent:
        """From the validated webhook payload shape (``noteId``/``folderId``/``notebookId``,
        ``before``/``after``)."""
        b, a = data.get("before") or {}, data.get("after") or {}
        note = data.get("noteId")
        return cls(
            data["type"], None if note is None else int(note), b.get("parentId"),
            b.get("targetNoteId"), a.get("parentId"), a.get("targetNoteId"),
            folder_id=data.get("folderId"), notebook_id=data.get("notebookId"),
            before_folder_id=b.get("folderId"), after_folder_id=a.get("folderId"),
            before_notebook_id=b.get("notebookId"), after_notebook_id=a.get("notebookId"),
            before_links=_ids(b.get("linkTargets")), after_links=_ids(a.get("linkTargets")),
            before_parent_folder_id=b.get("parentFolderId"),
            after_parent_folder_id=a.get("parentFolderId"),
        )

    def mentioned(self) -> set[int]:
        refs = (self.before_parent_id, self.before_target_id, self.after_parent_id,
                self.after_target_id)
        return {r for r in refs if r is not None}


def sibling_radius(strategies: Iterable[str]) -> int:
    """How far an edit's sibling effect reaches for the snapshots kept: the widest strategy's."""
    return max((get_strategy(s).sibling_radius for s in strategies), default=0)


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
    snapshots.stamp_touched(edited)  # before reading dep:X (see the module docstring)
    refs, near, close = _neighbours(notes, edited, events, sibling_radius)
    dependents = snapshots.dependents(edited)
    return edited | refs | (close & dependents), edited | refs | near | dependents


def wiki_affected(events: Sequence[NoteEvent], notes: NoteSource,
                  snapshots: SnapshotCache) -> tuple[set[int], set[int]]:
    """The wiki model's (urgent, all) foci: all are the edited notes and every focus that read a
    fact the events change (service.wiki_events), urgent those of them the events name (edited
    notes and their link targets); the changed facts are stamped before their index is read."""
    from service.wiki_events import changed_facts, named_notes, new_foci

    facts = changed_facts(events, notes)
    snapshots.stamp_touched(facts)  # before reading dep:{fact} (see the module docstring)
    affected = new_foci(events) | snapshots.dependents(facts)
    return affected & named_notes(events), affected


def record_events(events: Sequence[NoteEvent], notes: NoteSource, snapshots: SnapshotCache,
                  dirty: DirtyQueue, *, sibling_radius: int, now_ms: int) -> set[int]:
    """Resolve, bump generations and mark dirty (urgent foci in the urgent lane); returns the
    affected focus ids."""
    if notes.model == "wiki":
        urgent, affected = wiki_affected(events, notes, snapshots)
    else:
        urgent, affected = affected_foci(events, notes, snapshots, sibling_radius=sibling_radius)
    snapshots.bump_generations(affected)
    dirty.add(affected - urgent, now_ms=now_ms)
    dirty.add(urgent, now_ms=now_ms, urgent=True)
    return affected


def outdate_shown(note_ids: Iterable[int], snapshots: SnapshotCache) -> set[int]:
    """Bump the generation of the notes and of every focus whose stored snapshots show one of them
    (``dep:{X}``, on today's Doughnut ``dep:{note:X}``), with the cache alone; returns those foci.

    What a webhook does before it answers: the reader computes a snapshot older than its generation
    instead of serving it, so from the answer on no read shows an edited note's old text, however
    long the event waits for a worker. The notes are stamped first, as the event task does: a rebuild
    that read one of them before the edit but registers in ``dep:`` only after this read finds the
    stamp after its write and bumps its own focus (service.rebuild). The event task still resolves,
    bumps and marks dirty the whole affected set (tree neighbours, moves, deletions need the
    database)."""
    ids = set(note_ids)
    facts: list[int | str] = [*ids, *(f"note:{i}" for i in ids)]
    snapshots.stamp_touched(facts)
    foci = ids | snapshots.dependents(facts)
    snapshots.bump_generations(foci)
    return foci
