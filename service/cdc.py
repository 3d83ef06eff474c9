"""Change capture: a committed transaction's row changes become the webhook's events.

``graphrag cdc`` follows the database's row-based binary log (storage/binlog) and hands each
committed transaction of the watched tables to :func:`events_of`, which says what a relay would have
posted for it, in the webhook's JSON shape (worker/http/webhook.py), so both inputs share one path from
there on (``graphrag.process_events``). The row images are FULL, so every event carries its
before/after exactly, also what Doughnut never announces (moves and undo-deletes that do not touch
``updated_at``):

* **2025, the note tree** (``note``): insert → ``note.created``; ``deleted_at`` set or cleared →
  ``note.deleted`` / ``note.restored``; ``parent_id`` or ``target_note_id`` changed → ``note.moved``;
  any other change → ``note.updated``; a hard delete → ``note.deleted``. Each with ``parentId`` and
  ``targetNoteId`` before and after.
* **2026, folders and wiki links** (``note``, ``folder``, ``notebook``, ``note_wiki_title_cache``): the
  same for notes, with ``folderId`` and ``notebookId``; a note's link rows changed in the transaction
  give ``linkTargets`` before (the targets of its removed rows) and after (of its added rows), so the
  resolver sees exactly the targets that changed; link rows changed without their note's row give a
  ``note.updated`` of that note; ``folder.*`` and ``notebook.*`` events for those tables. A
  transaction that changes a row of the access tables (:data:`ACCESS`: tokens, subscriptions,
  circle members, ownerships, notebooks, the bazaar) moves the access epoch (service.access:
  :func:`touches_access`) after its events are enqueued; its subscription, bazaar, circle-member
  and ownership rows are ``notebook.access`` events naming the notebook, circle or ownership
  (service.wiki_events resolves them), and a notebook's new ownership is one too.

Seeing a transaction twice (a crash between enqueueing and storing the position) repeats its events,
which is harmless: an event only marks foci dirty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

__all__ = ["ACCESS", "WATCHED", "RowImage", "events_of", "touches_access"]

#: The tables whose rows decide who reads what as whom (today's Doughnut): a transaction changing
#: one of them moves the access epoch (service.access), it makes no event of its own
ACCESS = frozenset({"user_token", "subscription", "circle_user", "ownership", "notebook",
                    "bazaar_notebook"})
#: The tables change capture follows, per graph model of the schema profile.
WATCHED: Mapping[str, frozenset[str]] = {
    "tree": frozenset({"note"}),
    "wiki": frozenset({"note", "folder", "notebook", "note_wiki_title_cache"}) | ACCESS,
}
_EVENTFUL = frozenset({"note", "folder", "notebook"})
_LINKS = "note_wiki_title_cache"


class RowImage(Protocol):
    """One changed row: its table, the kind of change and its FULL images (None when absent)."""

    @property
    def table(self) -> str: ...
    @property
    def kind(self) -> Literal["insert", "update", "delete"]: ...
    @property
    def before(self) -> Mapping[str, Any] | None: ...
    @property
    def after(self) -> Mapping[str, Any] | None: ...


def events_of(changes: Sequence[RowImage], *, model: str, occurred_at: str) -> list[dict[str, Any]]:
    """The webhook events a relay would post for one committed transaction, in log order."""
    if model == "tree":
        return [_note_event(c, occurred_at, _TREE) for c in changes if c.table == "note"]
    links = _link_changes(changes)
    events = [_wiki_event(c, occurred_at, links) for c in changes if c.table in _EVENTFUL]
    named = {e.get("noteId") for e in events}
    events += [_links_only(note, moved, occurred_at)
               for note, moved in links.items() if note not in named]
    return events + _access(changes, occurred_at)


#: an access table's row -> what ``notebook.access`` names: (event field, the row's column)
_ACCESS_SUBJECTS = {"subscription": ("notebookId", "notebook_id"),
                    "bazaar_notebook": ("notebookId", "notebook_id"),
                    "circle_user": ("circleId", "circle_id"), "ownership": ("ownershipId", "id")}


def _access(changes: Sequence[RowImage], occurred_at: str) -> list[dict[str, Any]]:
    """``notebook.access`` per notebook, circle or ownership whose rows the transaction changed
    (before and after: a row that moves changes both)."""
    named: dict[tuple[str, int], None] = {}
    for c in changes:
        if c.table in _ACCESS_SUBJECTS:
            field, column = _ACCESS_SUBJECTS[c.table]
            for row in (c.before, c.after):
                if row is not None and row.get(column) is not None:
                    named[(field, int(row[column]))] = None
    return [{"type": "notebook.access", field: value, "occurredAt": occurred_at}
            for field, value in named]


def touches_access(changes: Sequence[RowImage], *, model: str) -> bool:
    """Whether the transaction changes a row of :data:`ACCESS` (today's Doughnut only)."""
    return model == "wiki" and any(c.table in ACCESS for c in changes)


# -- notes -------------------------------------------------------------------------------------------
_TREE = {"parentId": "parent_id", "targetNoteId": "target_note_id"}
_WIKI = {"folderId": "folder_id", "notebookId": "notebook_id"}


def _place(image: Mapping[str, Any] | None, fields: Mapping[str, str]) -> dict[str, Any] | None:
    return None if image is None else {name: image.get(column) for name, column in fields.items()}


def _note_kind(change: RowImage, fields: Mapping[str, str]) -> str:
    if change.kind == "insert":
        return "note.created"
    if change.kind == "delete":
        return "note.deleted"
    was, now = (change.before or {}).get("deleted_at"), (change.after or {}).get("deleted_at")
    if (was is None) != (now is None):
        return "note.deleted" if now is not None else "note.restored"
    moved = _place(change.before, fields) != _place(change.after, fields)
    return "note.moved" if moved else "note.updated"


def _note_event(change: RowImage, occurred_at: str, fields: Mapping[str, str]) -> dict[str, Any]:
    image = change.after if change.after is not None else change.before
    assert image is not None  # a row event always has one image
    event: dict[str, Any] = {"type": _note_kind(change, fields), "noteId": int(image["id"]),
                             "occurredAt": occurred_at}
    for side, row in (("before", change.before), ("after", change.after)):
        if row is not None:
            event[side] = _place(row, fields)
    return event


# -- the 2026 tables ---------------------------------------------------------------------------------
_Moved = tuple[list[int], list[int]]


def _link_changes(changes: Iterable[RowImage]) -> dict[int, _Moved]:
    """Per note, the targets of its link rows removed and added in the transaction."""
    out: dict[int, _Moved] = {}
    for c in changes:
        if c.table != _LINKS:
            continue
        for side, row in ((0, c.before), (1, c.after)):
            if row is not None and row.get("note_id") is not None:
                moved = out.setdefault(int(row["note_id"]), ([], []))
                if row.get("target_note_id") is not None:
                    moved[side].append(int(row["target_note_id"]))
    return out


def _wiki_event(change: RowImage, occurred_at: str, links: Mapping[int, _Moved]) -> dict[str, Any]:
    if change.table == "note":
        event = _note_event(change, occurred_at, _WIKI)
        moved = links.get(event["noteId"])
        if moved is not None:
            for side, targets in zip(("before", "after"), moved, strict=True):
                event.setdefault(side, {})["linkTargets"] = sorted(set(targets))
        return event
    return _group_event(change, occurred_at)


def _links_only(note: int, moved: _Moved, occurred_at: str) -> dict[str, Any]:
    before, after = (sorted(set(targets)) for targets in moved)
    return {"type": "note.updated", "noteId": note, "occurredAt": occurred_at,
            "before": {"linkTargets": before}, "after": {"linkTargets": after}}


_VERBS = {"insert": "created", "delete": "deleted"}


def _group_event(change: RowImage, occurred_at: str) -> dict[str, Any]:
    """``folder.*`` or ``notebook.*``: created, deleted, moved (a folder's parent) or renamed."""
    image = change.after if change.after is not None else change.before
    assert image is not None
    subject = "folder" if change.table == "folder" else "notebook"
    verb = _VERBS.get(change.kind, "renamed")
    before, after = change.before or {}, change.after or {}
    if subject == "notebook" and verb == "renamed" and \
            before.get("ownership_id") != after.get("ownership_id"):
        verb = "access"  # another owner: who may read it, and whose referrers show
    if subject == "folder" and verb == "renamed" and \
            before.get("parent_folder_id") != after.get("parent_folder_id"):
        verb = "moved"
    event: dict[str, Any] = {"type": f"{subject}.{verb}", f"{subject}Id": int(image["id"]),
                             "occurredAt": occurred_at}
    if subject == "folder":
        event["before"] = {"parentFolderId": before.get("parent_folder_id"),
                           "notebookId": before.get("notebook_id")}
        event["after"] = {"parentFolderId": after.get("parent_folder_id"),
                          "notebookId": after.get("notebook_id")}
    return event
