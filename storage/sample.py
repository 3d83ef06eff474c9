"""The bundled sample of Doughnut 2025 notes, for demos and tests (data in ``data/sample_2025.json``).

Contract: the same records on every call (the file is data, not code); ids run 1..N in order and a
parent always comes before its children; three notebooks, each with one head note; link notes
have a target; a deleted note's whole subtree is deleted with it, so no live note has a deleted
parent. The data holds edge cases on purpose: a parent with about sixty children, a hub with many
inbound links, a link to a link, a link with children, long CJK details, emoji (ZWJ sequences,
flags, skin tones), right-to-left text, empty details, and details of 149, 150 and 151 UTF-8 bytes.
"""

from __future__ import annotations

import datetime as dt
import json
from functools import cache
from importlib import resources
from typing import Any

from storage.records import TreeNote

__all__ = ["SAMPLE_FOCUS_IDS", "sample_notes"]


@cache
def _document() -> dict[str, Any]:
    text = resources.files("storage").joinpath("data", "sample_2025.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _moment(text: str | None) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(text)


def _note(raw: dict[str, Any]) -> TreeNote:
    created = _moment(raw["createdAt"])
    assert created is not None
    return TreeNote(id=raw["id"], title=raw["title"], parent_id=raw["parent"],
                    target_note_id=raw["target"], sibling_order=raw["order"],
                    details=raw["details"], created_at=created,
                    deleted_at=_moment(raw["deletedAt"]), notebook_id=raw["notebook"])


@cache
def _notes() -> tuple[TreeNote, ...]:
    return tuple(_note(raw) for raw in _document()["notes"])


def sample_notes() -> list[TreeNote]:
    """All sample notes, ordered by id; parents always come before their children."""
    return list(_notes())


#: Ids worth pointing a demo or a test at: ``hub`` (most live inbound link notes),
#: ``monster_parent`` (most live children, about sixty), ``link_note`` (a live link note whose parent
#: and target are live), ``deep_leaf`` (the deepest live non-link leaf), ``deleted`` (the smallest
#: soft-deleted id), ``cjk_long`` (the live note with the most CJK characters in its details).
SAMPLE_FOCUS_IDS: dict[str, int] = dict(_document()["focus"])
