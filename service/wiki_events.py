"""Which focus-context snapshots an edit of today's Doughnut affects: exact, by the facts they read.

Every focus-context snapshot registers the facts its computation read (docs/algorithms.md, "Focus
context"): ``note:X`` (a note's row: title, content, folder, notebook, deleted), ``links:P`` (the
outgoing link rows of an expanded note), ``inbound:T`` (the referrer list read for T), ``peers:N:F``
(the members of folder F, or ``peers:N:root`` of notebook N's root), ``folder:F`` (a folder name in a
path) and ``notebook:N`` (a notebook's name, owner and the access read from it). An event names the
facts it changes, and the reverse index of each fact (``dep:{fact}``) gives exactly the foci to
rebuild:

=====================  ==================================================================================
event                  facts changed
=====================  ==================================================================================
note content/title     ``note:X``, ``links:X``, ``inbound:T`` for every target added or removed
note move              ``note:X``, ``peers:`` of the old and new group, ``inbound:T`` of its targets (a
                       referrer's notebook decides whether the target's viewer sees it)
note create            as a move into its group, plus ``links:X`` and ``inbound:T`` of its targets
note delete / restore  ``note:X``, ``peers:`` of its group, ``inbound:T`` of its targets, ``links:R`` of
                       every note linking to it (their outgoing lists drop or regain it)
folder rename / move   ``folder:F`` (every path through F); a delete also the notebook root's ``peers:``
notebook rename        ``notebook:N``
notebook access        ``notebook:N`` for the notebook, or every notebook of the circle or ownership the
                       event names (its owner, a subscription, a circle member or the bazaar changed:
                       who may read it), and ``inbound:T`` for every target of a link of a live note
                       there (whose referrers a subscriber or owner sees changed)
=====================  ==================================================================================

A title rename that makes Doughnut rewrite its referrers arrives as one event per rewritten note: each
is a content edit. Events without ``before``/``after`` are completed from the database: the note's
current row and link targets (what changed is then over-approximated, never missed, except an old
group nobody reported: a sender of moves must say where the note was).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from graphrag.wiki.focus.trace import group_key
from graphrag.wiki.model import WikiNeed, WikiNote
from graphrag.wiki.view import WikiView
from service.note_event import NoteEvent
from service.ports import NoteSource, SnapshotCache

__all__ = ["affected_foci", "changed_facts", "named_notes", "new_foci"]

_PLACED = frozenset({"note.created", "note.moved", "note.deleted", "note.restored"})


def _peers(notebook_id: int | None, folder_id: int | None) -> str:
    return f"peers:{group_key(notebook_id, folder_id)}"


def _rows(source: NoteSource, ids: set[int]) -> dict[int, WikiNote | None]:
    view = WikiView()
    with source.batch() as load:
        load(view, WikiNeed(notes=frozenset(ids), links=frozenset(ids)))
    return {i: view.note(i) for i in ids}


def _targets(source: NoteSource, ids: set[int]) -> dict[int, tuple[int, ...]]:
    view = WikiView()
    with source.batch() as load:
        load(view, WikiNeed(links=frozenset(ids)))
    return {i: view.links(i) for i in ids}


def _note_facts(e: NoteEvent, row: WikiNote | None, targets: tuple[int, ...]) -> set[str]:
    x = e.note_id
    facts = {f"note:{x}", f"links:{x}"}
    before, after = set(e.before_links or ()), set(e.after_links or ())
    moved = e.type in _PLACED or (e.before_folder_id, e.before_notebook_id) != (
        e.after_folder_id, e.after_notebook_id)
    changed = before ^ after if e.before_links is not None and e.after_links is not None else set()
    known = set(targets) | before | after
    facts |= {f"inbound:{t}" for t in (known if moved or not changed else changed)}
    if moved:
        facts |= _groups(e, row)
    return facts


def _groups(e: NoteEvent, row: WikiNote | None) -> set[str]:
    groups = set()
    if e.before_notebook_id is not None or e.before_folder_id is not None:
        groups.add(_peers(e.before_notebook_id, e.before_folder_id))
    if e.after_notebook_id is not None or e.after_folder_id is not None:
        groups.add(_peers(e.after_notebook_id, e.after_folder_id))
    if row is not None:
        groups.add(_peers(row.notebook_id, row.folder_id))
    return groups


def _other_facts(e: NoteEvent) -> set[str]:
    if e.folder_id is not None:
        facts = {f"folder:{e.folder_id}"}
        if e.type == "folder.deleted":
            facts.add(_peers(e.before_notebook_id, None))
        return facts
    return {f"notebook:{e.notebook_id}"} if e.notebook_id is not None else set()


def _access_facts(events: Sequence[NoteEvent], source: NoteSource) -> set[str]:
    """``notebook.access``: who may read the notebooks it names (directly, or through a circle or
    an ownership) and whose referrers in them a viewer sees (see the module docstring)."""
    access = [e for e in events if e.type == "notebook.access"]
    if not access:
        return set()
    books, targets = source.access_reach(
        {e.notebook_id for e in access if e.notebook_id is not None},
        {e.circle_id for e in access if e.circle_id is not None},
        {e.ownership_id for e in access if e.ownership_id is not None})
    return {f"notebook:{n}" for n in books} | {f"inbound:{t}" for t in targets}


def changed_facts(events: Sequence[NoteEvent], source: NoteSource) -> set[str]:
    """Every fact the events change (reads the edited notes' rows, targets and referrers)."""
    notes = {e.note_id for e in events if e.note_id is not None}
    rows, targets = (_rows(source, notes), _targets(source, notes)) if notes else ({}, {})
    facts: set[str] = set()
    for e in events:
        if e.note_id is None:
            facts |= _other_facts(e)
        else:
            facts |= _note_facts(e, rows.get(e.note_id), targets.get(e.note_id, ()))
    facts |= _linkers(events, source)
    return facts | _access_facts(events, source)


def _linkers(events: Sequence[NoteEvent], source: NoteSource) -> set[str]:
    """``links:R`` for every note R linking to a deleted or restored note."""
    gone = {e.note_id for e in events if e.type in ("note.deleted", "note.restored")
            and e.note_id is not None}
    if not gone:
        return set()
    referrers = source.referrers_of(gone)
    return {f"links:{r}" for rs in referrers.values() for r in rs}


def new_foci(events: Iterable[NoteEvent]) -> set[int]:
    """Notes whose own snapshots an event creates, removes or rewrites (the edited notes)."""
    return {e.note_id for e in events if e.note_id is not None}


def named_notes(events: Sequence[NoteEvent]) -> set[int]:
    """The notes the events name: each edited note and its link targets before and after."""
    named = new_foci(events)
    for e in events:
        named.update(e.before_links or ())
        named.update(e.after_links or ())
    return named


def affected_foci(events: Sequence[NoteEvent], notes: NoteSource,
                  snapshots: SnapshotCache) -> tuple[set[int], set[int]]:
    """The wiki model's (urgent, all) foci: all are the edited notes and every focus that read a
    fact the events change, urgent those of them the events name (edited notes and their link
    targets); the changed facts are stamped before their index is read (docs/redis.md, "The edit
    race")."""
    facts = changed_facts(events, notes)
    snapshots.stamp_touched(facts)  # before reading dep:{fact} (see the module docstring)
    affected = new_foci(events) | snapshots.dependents(facts)
    return affected & named_notes(events), affected
