"""Reading a stored snapshot back: :func:`decode_envelope` (the layout is service.envelope's).

Decoding never raises: missing, corrupt or foreign-schema bytes decode to None (a miss), so a bad
value in Redis costs one recomputation, never an error in front of a user.

A hit parses only the header. ``result`` is the last member and is served as the bytes it is
stored as; ``resultCrc32`` in the header is the CRC-32 of those bytes, so a value whose result was
cut, overwritten or garbled is still a miss without parsing 6 KB of JSON on the reader's hot path:
the bytes that match it are the bytes this service wrote, which were valid JSON. A trace snapshot's
``trace`` (tens of KB) is the member right before ``result`` and is kept as bytes the same way,
under ``traceCrc32`` (in a packed value: inflated, and checked, only when it is needed). A value
without ``resultCrc32`` (none is written any more) is parsed and checked whole, as before.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import orjson

from graphrag.tree.render import loads as loads_json
from graphrag.wiki.model import Viewer
from service.envelope import SCHEMA, Envelope, shaped
from service.packing import PackedTrace, is_packed, unpack

__all__ = ["decode_envelope"]

_INT_FIELDS = ("noteId", "generation", "computedAt", "asOf", "maxTokenLimit", "focusTokens")
_INT_ONLY = frozenset({int})
#: lines each holding a colon (:func:`_facts`)
_FACT_LINES = re.compile(r"[^\n:]*:[^\n]*(?:\n[^\n:]*:[^\n]*)*")


def _ints(values: Any) -> bool:
    """Whether ``values`` is a list of plain ints (bools excluded); one C-level pass."""
    return isinstance(values, list) and set(map(type, values)) <= _INT_ONLY


def _facts(values: Any) -> bool:
    """Whether ``values`` is a list of note ids, or of wiki facts (``kind:...`` strings).

    Checked on every hit, so in two C-level passes: joining the list raises unless every member
    is text, and every line of the joined text holds a colon. A line is part of exactly one member,
    so a member without a colon leaves a line without one (a member holding a newline may be
    refused though it has a colon: no fact does)."""
    if not isinstance(values, list):
        return False
    if not values or type(values[0]) is not str:
        return _ints(values)
    try:
        joined = "\n".join(values)
    except TypeError:
        return False
    return _FACT_LINES.fullmatch(joined) is not None


def _traced(obj: dict[str, Any]) -> bool:
    """A trace, when present (parsed, or split off with its checksum), is an object with the
    tokenLimit its result was cut at."""
    if "trace" not in obj and "traceCrc32" not in obj:
        return True
    return type(obj.get("resultTokenLimit")) is int and isinstance(obj.get("trace", {}), dict)


def _valid_header(obj: Any) -> bool:
    """Every member but ``result`` has its documented type."""
    if not isinstance(obj, dict) or type(obj.get("schema")) is not int or obj["schema"] != SCHEMA:
        return False
    if not _ints([obj.get(k) for k in _INT_FIELDS]):
        return False
    if obj.get("seed") is not None and type(obj.get("seed")) is not int:
        return False
    if not (isinstance(obj.get("strategy"), str) and isinstance(obj.get("configHash"), str)):
        return False
    if not isinstance(obj.get("database", ""), str) or not _viewer_shaped(obj.get("viewer")):
        return False
    return _ints(obj.get("relatedTokens")) and _facts(obj.get("dependsOn")) and _traced(obj)


def _viewer_shaped(value: Any) -> bool:
    """Absent, or a viewer's JSON: ``{}``, ``{"userId": n}`` or ``{"circleId": n}``."""
    if value is None:
        return True
    if not isinstance(value, dict) or len(value) > 1 or not set(value) <= {"userId", "circleId"}:
        return False
    return _ints(list(value.values()))


def _valid_whole(obj: Any) -> bool:
    """A value without a checksum, parsed whole: its header and its result's shape."""
    if not _valid_header(obj) or not shaped(result := obj.get("result")):
        return False
    return "trace" in obj or len(result["relatedNotes"]) == len(obj["relatedTokens"])


_RESULT_MARK, _TRACE_MARK = b',"result":', b',"trace":'
#: (the header as a JSON object of its own, the trace's bytes or None, the result's bytes)
Parts = tuple[bytes, bytes | None, bytes]


def _split(raw: bytes) -> Parts | None:
    """The parts of ``raw`` when ``result`` is its last member and ``trace``, if any, the one
    before (as this service writes them).

    Inside a JSON string a quote is escaped, so the bytes ``,"result":`` and ``,"trace":`` only
    ever appear as member names, and no object of the layout but the envelope has members called
    so: each occurs at most once, and searching from the start finds ``result`` after the header (a
    search from the end would cross the whole result: ten times slower on a 6 KB snapshot, on the
    reader's hot path).
    """
    at = raw.find(_RESULT_MARK)
    if at <= 0 or not raw.endswith(b"}"):
        return None
    result = raw[at + len(_RESULT_MARK) : -1]
    trace_at = raw.find(_TRACE_MARK, 0, at)
    if trace_at < 0:
        return raw[:at] + b"}", None, result
    return raw[:trace_at] + b"}", raw[trace_at + len(_TRACE_MARK) : at], result


def _parsed(data: bytes) -> Any:
    try:
        return loads_json(data)
    except (ValueError, TypeError):  # orjson's and the standard library's decode errors
        return None


def _matches(data: bytes | None, crc: Any) -> bool:
    """Whether ``data`` is absent and has no checksum, or is there and matches it."""
    if data is None:
        return crc is None
    return type(crc) is int and zlib.crc32(data) == crc


def _checked(raw: bytes) -> tuple[dict[str, Any], bytes | None, bytes] | None:
    """The header and the trace's and result's bytes, if the header is valid and the trace and the
    result are the ones it names: by their checksums, or (none) by parsing the whole value."""
    parts = _split(raw)
    if parts is None or not isinstance(header := _parsed(parts[0]), dict):
        return None
    if "resultCrc32" not in header:
        return _whole(raw, parts)
    _, trace_json, result_json = parts
    if not (_valid_header(header) and _matches(trace_json, header.get("traceCrc32"))):
        return None
    return (header, trace_json, result_json) if _matches(result_json, header["resultCrc32"]) else None


def _whole(raw: bytes, parts: Parts) -> tuple[dict[str, Any], bytes | None, bytes] | None:
    """A value without checksums, parsed and checked whole."""
    if not _valid_whole(obj := _parsed(raw)):
        return None
    try:
        trace_json = orjson.dumps(obj["trace"]) if "trace" in obj else None
    except TypeError:  # a lone surrogate the standard library read: not a trace this service wrote
        return None
    return obj, trace_json, parts[2]


def decode_envelope(data: bytes | str | None) -> Envelope | None:
    """The envelope in ``data``, or None for missing, corrupt or foreign-schema bytes. Never raises."""
    if data is None:
        return None
    try:
        raw = data.encode() if isinstance(data, str) else data
    except UnicodeEncodeError:
        return None
    return _unpacked(raw) if is_packed(raw) else _plain(raw)


def _unpacked(raw: bytes) -> Envelope | None:
    """A packed trace snapshot: its result inflated and checked, its trace left packed."""
    unpacked = unpack(raw)
    if unpacked is None or not _valid_header(unpacked[0]):
        return None
    header, result_json, packed = unpacked
    return _envelope(header, result_json, None, packed)


def _plain(raw: bytes) -> Envelope | None:
    checked = _checked(raw)
    if checked is None:
        return None
    obj, trace_json, result_json = checked
    return _envelope(obj, result_json, trace_json, None)


def _envelope(obj: dict[str, Any], result_json: bytes, trace_json: bytes | None,
              packed: PackedTrace | None) -> Envelope:
    return Envelope(
        note_id=obj["noteId"], seed=obj["seed"], strategy=obj["strategy"],
        generation=obj["generation"], computed_at_ms=obj["computedAt"], as_of_ms=obj["asOf"],
        max_token_limit=obj["maxTokenLimit"], focus_tokens=obj["focusTokens"],
        related_tokens=tuple(obj["relatedTokens"]), depends_on=tuple(obj["dependsOn"]),
        config_hash=obj["configHash"], result_json=result_json, trace_json=trace_json,
        result_limit=obj.get("resultTokenLimit"), packed=packed, database=obj.get("database", ""),
        viewer=_viewer(obj.get("viewer")),
    )


def _viewer(value: Any) -> Viewer | None:
    """The header's ``viewer`` (checked by :func:`_valid_header`), None when it has none."""
    return None if value is None else Viewer.from_json(value)
