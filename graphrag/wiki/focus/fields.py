"""The values a focus-context trace holds: a note as shown, the focus, a wiki step, a peer list.

Each related note's rendering is made once per :class:`NoteFields` instance, and a view derives a
note's fields once (graphrag.wiki.focus.walk), so every trace and answer showing the note shares it:
its JSON member of a trace's JSON form (:attr:`NoteFields.json_form`) and its JSON members in an
answer (:attr:`NoteFields.fragments`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from graphrag.wiki.focus.render import note_fragments

__all__ = ["FocusFields", "NoteFields", "PeerList", "WikiStep", "group_key", "text_out"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def group_key(notebook_id: int | None, folder_id: int | None) -> str:
    """``<notebook>:<folder|root>``, the name of a peer group (and of its ``peers:`` fact)."""
    return (
        f"{'none' if notebook_id is None else notebook_id}:{'root' if folder_id is None else folder_id}"
    )


@dataclass(frozen=True)
class NoteFields:
    """A related note as it is shown (body cut to the related cap), its cost and peer group."""

    notebook: str | None
    title: str
    folder_path: str
    created_at_ms: int
    content: str | None
    content_truncated: bool
    cost: int
    group: str | None

    @cached_property
    def json_form(self) -> dict[str, Any]:
        """The note's member of a trace's ``notes``, built once per instance: a view derives a
        note's fields once (graphrag.wiki.focus.walk) and every trace showing the note writes
        them. Shared: read it, never change it."""
        return _note_out(self)

    @cached_property
    def fragments(self) -> tuple[bytes, bytes]:
        """The note's JSON members as every answer shows it, around its depth and path
        (graphrag.wiki.focus.render.note_fragments), built once per instance."""
        return note_fragments(self.notebook, self.title, self.folder_path, self.created_at_ms,
                              self.content, self.content_truncated)


@dataclass(frozen=True)
class FocusFields:
    """The focus as shown, its body cut to the trace's focus cap; ``content_shortened`` is true when
    that cut already shortened the body (so every smaller cut is marked truncated)."""

    notebook: str | None
    title: str
    folder_path: str
    created_at_ms: int
    content: str | None
    content_shortened: bool
    group: str | None


@dataclass(frozen=True)
class WikiStep:
    """One wiki-reached note in emission order: depth and retrieval path (ending at the note)."""

    note_id: int
    depth: int
    path: tuple[str, ...]


@dataclass(frozen=True)
class PeerList:
    """A prefix of a group's live members in sampling order; ``complete`` when it is all of them."""

    ids: tuple[int, ...]
    complete: bool


def text_out(text: str | None) -> str | dict[str, str] | None:
    if text is None or _SURROGATE.search(text) is None:
        return text
    return {"utf16le": text.encode("utf-16-le", "surrogatepass").hex()}


def _note_out(n: NoteFields) -> dict[str, Any]:
    return {
        "notebook": n.notebook,
        "title": n.title,
        "folderPath": n.folder_path,
        "createdAtMs": n.created_at_ms,
        "content": text_out(n.content),
        "contentTruncated": n.content_truncated,
        "cost": n.cost,
        "group": n.group,
    }
