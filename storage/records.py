"""Plain records of Doughnut's notes as demos, tests and generators write them (no column names).

The schema profiles translate these into their tables; the in-memory note source serves them as is.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

__all__ = ["TreeNote"]


@dataclass(frozen=True, slots=True)
class TreeNote:
    """One note of the 2025 tree layout. ``created_at``/``deleted_at`` are naive datetimes meaning
    UTC; a note with ``target_note_id`` is a link note (its parent is the subject)."""

    id: int
    title: str
    parent_id: int | None = None
    target_note_id: int | None = None
    sibling_order: int = 1
    details: str | None = None
    created_at: dt.datetime = dt.datetime(2025, 1, 1)
    deleted_at: dt.datetime | None = None
    notebook_id: int | None = None
