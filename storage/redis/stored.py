"""How the cache's stored values read back, and how ids (and which foci show each fact, for the
reverse index) go into a script's arguments.

Values come back from Redis as bytes (the client never decodes): a fact stored as digits is a note
id and reads as an int, any other fact as its text, and a counter that is missing or not a number (a
foreign value under our prefix) reads as 0 rather than failing the read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from service.envelope import Envelope

__all__ = ["foci_showing", "id_list", "stored_counter", "stored_fact", "stored_facts"]


def stored_fact(value: Any) -> int | str:
    """A stored fact: a note id (digits) as an int, any other fact as its text."""
    text = value.decode() if isinstance(value, bytes) else str(value)
    return int(text) if text.isdigit() else text


def stored_counter(value: Any) -> int:
    """A stored counter; missing or not a number (a foreign value) reads as 0."""
    try:
        return int(value or 0)
    except ValueError:
        return 0


def stored_facts(values: Iterable[Any]) -> set[Any]:
    return {stored_fact(v) for v in values}


def foci_showing(envelopes: Iterable[Envelope]) -> dict[Any, list[int]]:
    """Shown note (or fact) -> the distinct foci (in first-seen order) whose envelopes show it."""
    out: dict[Any, dict[int, None]] = {}
    for env in envelopes:
        for x in env.depends_on:
            out.setdefault(x, {})[env.note_id] = None
    return {x: list(foci) for x, foci in out.items()}


def id_list(ids: Iterable[int | str]) -> str:
    return " ".join(i if isinstance(i, str) else str(int(i)) for i in ids)
