"""The change events Doughnut reports (or change capture derives): one type for both graph models.

A note event names its note and, where the sender knows, what was around it before and after (the
2025 tree: parent and target; today's wiki model: folder, notebook and resolved link targets).
Folder and notebook events exist on the wiki model only. The resolvers of each model
(service.tree_events, service.wiki_events) turn events into the foci to rebuild.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["EVENT_TYPES", "SUBJECTS", "NoteEvent", "foreign_to"]

EVENT_TYPES = (
    "note.created", "note.updated", "note.moved", "note.deleted", "note.restored",
    "folder.created", "folder.renamed", "folder.moved", "folder.deleted",
    "notebook.created", "notebook.renamed", "notebook.deleted", "notebook.access",
)
#: The id field each kind of event names its subject with.
SUBJECTS = {"note": "noteId", "folder": "folderId", "notebook": "notebookId"}
#: What only one era's events carry: the 2025 tree's places, and today's (folders, wiki links).
_ERA_FIELDS = {"tree": frozenset({"parentId", "targetNoteId"}),
               "wiki": frozenset({"folderId", "notebookId", "parentFolderId", "linkTargets"})}
_ERA_NAMES = {"tree": "Doughnut 2025's (doughnut-2025)", "wiki": "today's Doughnut's (doughnut-2026)"}


def foreign_to(model: str, event: Mapping[str, Any]) -> str | None:
    """What in a webhook event (its validated JSON) belongs to the other era than a database of
    graph ``model`` (``tree`` or ``wiki``), said in one phrase; None when nothing does."""
    other = "wiki" if model == "tree" else "tree"
    if model == "tree" and not event["type"].startswith("note."):
        return f"{event['type']} is {_ERA_NAMES[other]} event"
    fields = {name for side in ("before", "after") for name in (event.get(side) or {})}
    found = sorted(fields & _ERA_FIELDS[other])
    if not found:
        return None
    return f"{', '.join(found)} {'is' if len(found) == 1 else 'are'} {_ERA_NAMES[other]}"


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
    #: ``notebook.access`` from change capture: the circle or the ownership whose change it is
    #: (service.cdc), for the notebooks they own
    circle_id: int | None = None
    ownership_id: int | None = None

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
            circle_id=data.get("circleId"), ownership_id=data.get("ownershipId"),
        )

    def mentioned(self) -> set[int]:
        refs = (self.before_parent_id, self.before_target_id, self.after_parent_id,
                self.after_target_id)
        return {r for r in refs if r is not None}
