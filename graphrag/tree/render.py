"""Doughnut's GraphRAGResult JSON, property for property (docs/doughnut.md).

Nulls are omitted, empty lists kept, property order fixed; bytes are compact orjson (separators ``,``
and ``:``, non-ASCII not escaped), which is also exactly what a note's token cost is measured on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import orjson

from graphrag.core.jsonload import loads
from graphrag.tree.model import Relation, Row

__all__ = [
    "DETAILS_TRUNCATE_BYTES",
    "bare_note",
    "created_at",
    "dumps",
    "focus_note",
    "loads",
    "truncate_details",
    "uri",
]

DETAILS_TRUNCATE_BYTES = 150
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

JsonObject = dict[str, Any]


def uri(note_id: int) -> str:
    """A note's URI: ``"/n" + id``."""
    return f"/n{note_id}"


def created_at(epoch_ms: int) -> str:
    """UTC with milliseconds, e.g. ``2025-12-03T10:15:17.000+00:00``."""
    moment = _EPOCH + dt.timedelta(milliseconds=epoch_ms)
    if moment.year >= 1000:  # the same text, without strftime's format parsing
        return moment.isoformat(timespec="milliseconds")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}+00:00"


def truncate_details(details: str, limit_bytes: int) -> tuple[str, bool]:
    """Cut to the longest prefix of at most ``limit_bytes`` UTF-8 bytes plus ``...``; never split a
    character. Details within the limit come back unchanged with ``False``."""
    encoded = details.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit_bytes:
        return details, False
    # The source is valid UTF-8, so "ignore" can only drop a character cut in half at the end.
    return encoded[:limit_bytes].decode("utf-8", "ignore") + "...", True


def _uri_and_title(note_id: int, title: str) -> JsonObject:
    return {"uri": uri(note_id), "title": title}


def bare_note(row: Row, relation: Relation, *, truncate_bytes: int | None) -> JsonObject:
    """A BareNote; ``truncate_bytes=None`` keeps details whole (the focus note)."""
    out: JsonObject = {"uri": uri(row.id)}
    if row.is_link:
        if row.parent is not None:
            out["subjectUriAndTitle"] = _uri_and_title(row.parent.id, row.parent.title)
        out["predicate"] = row.title
        if row.target is not None:
            out["objectUriAndTitle"] = _uri_and_title(row.target.id, row.target.title)
    else:
        out["title"] = row.title
        if row.parent is not None:
            out["parentUriAndTitle"] = _uri_and_title(row.parent.id, row.parent.title)
    out["relationToFocusNote"] = relation.value
    if row.details is not None:
        details, cut = (
            (row.details, False)
            if truncate_bytes is None
            else truncate_details(row.details, truncate_bytes)
        )
        out["details"] = details
        if cut:
            out["detailsTruncated"] = True
    out["createdAt"] = created_at(row.created_at_ms)
    return out


def focus_note(
    row: Row,
    contextual_path: Sequence[int],
    *,
    children: Sequence[int] = (),
    prior_siblings: Sequence[int] = (),
    younger_siblings: Sequence[int] = (),
    inbound_references: Sequence[int] = (),
) -> JsonObject:
    """A FocusNote: BareNote fields (details whole, relation Self) then the five URI lists."""
    out = bare_note(row, Relation.SELF, truncate_bytes=None)
    out["contextualPath"] = [uri(i) for i in contextual_path]
    out["children"] = [uri(i) for i in children]
    out["priorSiblings"] = [uri(i) for i in prior_siblings]
    out["youngerSiblings"] = [uri(i) for i in younger_siblings]
    out["inboundReferences"] = [uri(i) for i in inbound_references]
    return out


def dumps(value: Any) -> bytes:
    """Compact JSON bytes as Doughnut emits them."""
    return orjson.dumps(value)
