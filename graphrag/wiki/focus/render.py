"""The bytes Doughnut's web layer and markdown renderer produce for a FocusContextResult.

JSON (``GET /api/notes/{id}/graph``): Spring Boot 4.1 writes the DTOs with Jackson 3's UTF-8
generator. Properties come in declaration order (every property is a creator parameter); the DTOs are
annotated to omit nulls, so ``notebook`` and ``content`` disappear when null while ``""``, ``[]`` and
booleans stay. Output is compact. Strings are escaped as that generator does by default: ``"`` and
``\\`` with a backslash; ``\\b \\t \\n \\f \\r`` as such; every other control character below U+0020
as ``\\u00XX`` with upper-case hex; ``/`` and DEL as they are; everything else as raw UTF-8, a
surrogate pair joined into one 4-byte sequence; a lone surrogate (a Java cut may leave one at the end
of a body) as ``\\uXXXX``, upper-case. ``createdAt`` is the instant in UTC with milliseconds and ``Z``,
e.g. ``2026-05-04T10:15:17.000Z`` (Jackson 3's default for ``java.sql.Timestamp``; years 1-9999).

Markdown (``GET /api/notes/{id}/ai-context-markdown``, as ``{"markdown": ...}``): exactly
``FocusContextMarkdownRenderer.render`` with ``Max depth: <max depth>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import orjson

from graphrag.wiki.approx_tokens import join_surrogates
from graphrag.wiki.focus.types import FocusContextResult, FocusNoteOut, RelatedNoteOut

__all__ = [
    "focus_json",
    "iso_instant",
    "json_string",
    "markdown_json",
    "note_fragments",
    "path_json",
    "related_json",
    "render_focus_note",
    "render_markdown",
    "render_related_notes",
    "result_json",
    "results_json",
    "safe_fence",
]

_ESCAPED = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')
_SURROGATES = re.compile("[\ud800-\udfff]")
_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Java's Character.isWhitespace: separators except no-break spaces, and these controls.
_JAVA_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2008\u2009\u200a"
    "\u2028\u2029\u205f\u3000"
)


# -- JSON ------------------------------------------------------------------------------------------
def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT_ESCAPES.get(char) or f"\\u{ord(char):04X}"


def _upper_hex(match: re.Match[bytes]) -> bytes:
    escape = match.group()
    return escape if escape[1:2] != b"u" else b"\\u" + escape[2:].upper()


#: every escape, left to right (so ``\\\\`` then ``u001a``, a backslash and text, is not read as
#: a control's escape)
_ESCAPE_SEQUENCE = re.compile(rb"\\(?:u[0-9a-f]{4}|.)")


def json_string(text: str) -> bytes:
    """A JSON string literal exactly as Jackson 3's UTF-8 generator writes ``text``.

    Without a surrogate, orjson writes the same bytes (the same short escapes, other controls as
    ``\\u00XX``, everything else as UTF-8) but for the case of those hex digits, which Jackson
    writes in upper case; a text with a surrogate (joined into pairs, a lone one escaped) takes
    the regular expression."""
    if _SURROGATES.search(text) is None:
        return _upper_escapes(orjson.dumps(text))
    return b'"' + _ESCAPED.sub(_escape, join_surrogates(text)).encode("utf-8") + b'"'


@lru_cache(maxsize=65_536)
def iso_instant(epoch_ms: int) -> str:
    """``yyyy-MM-ddTHH:mm:ss.SSSZ`` in UTC (remembered: the same notes show in many answers)."""
    moment = _EPOCH + timedelta(milliseconds=epoch_ms)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
        f"{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def _array(items: Iterable[str]) -> bytes:
    return b"[" + b",".join(map(json_string, items)) + b"]"


Members = list[tuple[str, Any]]


def _members(pairs: Members) -> bytes:
    """A JSON object of the non-null members, in the given order, each value written as Jackson
    writes it (a text, an integer, a boolean, a list of texts)."""
    written = (b'"' + k.encode() + b'":' + _value(v) for k, v in pairs if v is not None)
    return b"{" + b",".join(written) + b"}"


def _value(value: Any) -> bytes:
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, int):
        return str(value).encode()
    return _array(value)


def _focus_members(f: FocusNoteOut) -> Members:
    return [
        ("notebook", f.notebook), ("title", f.title), ("folderPath", f.folder_path), ("depth", f.depth),
        ("outgoingLinks", f.outgoing_links), ("inboundReferences", f.inbound_references),
        ("sampleSiblings", f.sample_siblings), ("createdAt", iso_instant(f.created_at_ms)),
        ("content", f.content), ("contentTruncated", f.content_truncated),
    ]


def _object(pairs: Members) -> dict[str, Any]:
    return {k: v for k, v in pairs if v is not None}


def _written(pairs: Members) -> bytes:
    """``pairs`` as a JSON object (see :func:`_members`): by orjson in one call when no text holds
    a surrogate (orjson refuses one; the same bytes, five times faster), else member by member."""
    try:
        return _upper_escapes(orjson.dumps(_object(pairs)))
    except TypeError:
        return _members(pairs)


def _texts(items: list[str]) -> bytes:
    """A JSON array of texts, as :func:`_written` writes a member."""
    try:
        return _upper_escapes(orjson.dumps(items))
    except TypeError:
        return _array(items)


def _upper_escapes(written: bytes) -> bytes:
    """orjson's bytes with Jackson's upper-case hex in ``\\u00XX`` escapes."""
    return written if b"\\u00" not in written else _ESCAPE_SEQUENCE.sub(_upper_hex, written)


def note_fragments(
    notebook: str | None, title: str, folder_path: str, created_at_ms: int, content: str | None,
    content_truncated: bool,
) -> tuple[bytes, bytes]:
    """A related note's members as it is shown at any depth and path, without the braces: those
    before ``depth`` and those after ``retrievalPath`` (:func:`related_json` joins them)."""
    head = _written([("notebook", notebook), ("title", title), ("folderPath", folder_path)])
    tail = _written([("createdAt", iso_instant(created_at_ms)), ("content", content),
                     ("contentTruncated", content_truncated)])
    return head[1:-1], tail[1:-1]


def path_json(path: Iterable[str]) -> bytes:
    """A retrieval path's JSON array."""
    return _texts(list(path))


#: a related note's depth as JSON, written once for the depths a request can reach (10 at most)
_DEPTHS = tuple(str(depth).encode() for depth in range(11))


def related_json(head: bytes, depth: int, path: bytes, tail: bytes) -> bytes:
    """A ``FocusContextNote`` object from its :func:`note_fragments`, depth and :func:`path_json`."""
    written = _DEPTHS[depth] if 0 <= depth < len(_DEPTHS) else str(depth).encode()
    return b"".join((b"{", head, b',"depth":', written, b',"retrievalPath":', path, b",", tail,
                     b"}"))


def focus_json(focus: FocusNoteOut) -> bytes:
    """The ``focusNote`` object."""
    return _written(_focus_members(focus))


def results_json(focus: bytes, related: Iterable[bytes | memoryview]) -> bytes:
    """The ``/graph`` response body from the focus note's object and the related notes' objects
    (or runs of them, comma-separated)."""
    return b"".join((b'{"focusNote":', focus, b',"relatedNotes":[', b",".join(related), b"]}"))


def result_json(result: FocusContextResult) -> bytes:
    """The ``/graph`` response body, written from the same fragments a replay joins
    (graphrag.wiki.focus.cut.cut_json)."""
    return results_json(focus_json(result.focus_note), map(_related_json, result.related_notes))


def _related_json(n: RelatedNoteOut) -> bytes:
    head, tail = note_fragments(n.notebook, n.title, n.folder_path, n.created_at_ms, n.content,
                                n.content_truncated)
    return related_json(head, n.depth, path_json(n.retrieval_path), tail)


def markdown_json(markdown: str) -> bytes:
    """The ``/ai-context-markdown`` response body (``NoteAiContextMarkdown``)."""
    return b'{"markdown":' + json_string(markdown) + b"}"


# -- markdown --------------------------------------------------------------------------------------
def safe_fence(content: str | None) -> str:
    """Backticks, one more than the longest run in ``content`` and at least three."""
    longest = max((len(run) for run in re.findall("`+", content or "")), default=0)
    return "`" * max(3, longest + 1)


def _is_blank(content: str) -> bool:
    """Java's ``String.isBlank``."""
    return all(char in _JAVA_WHITESPACE for char in content)


def _metadata(title: str, notebook: str | None, folder_path: str, depth: int) -> str:
    lines = f"Title: {title}\n"
    if notebook is not None:
        lines += f"Notebook: {notebook}\n"
    if folder_path:
        lines += f"Folder: {folder_path}\n"
    return lines + f"Depth: {depth}\n"


def _body(truncated: bool, content: str | None) -> str:
    text = "Truncated: true\n" if truncated else ""
    if content is None or _is_blank(content):
        return text
    fence = safe_fence(content)
    ending = "" if content.endswith("\n") else "\n"
    return text + f"\nContent:\n\n{fence}doughnut-note-md\n{content}{ending}{fence}\n"


def render_focus_note(focus: FocusNoteOut) -> str:
    """The ``<focus_note>`` block (``renderFocusNote``), starting with an empty line."""
    meta = _metadata(focus.title, focus.notebook, focus.folder_path, focus.depth)
    return f"\n<focus_note>\n{meta}{_body(focus.content_truncated, focus.content)}</focus_note>\n"


def _retrieved_note(note: RelatedNoteOut) -> str:
    meta = _metadata(note.title, note.notebook, note.folder_path, note.depth)
    path = f"Path: {' -> '.join(note.retrieval_path)}\n" if note.retrieval_path else ""
    body = _body(note.content_truncated, note.content)
    return f"\n<retrieved_note>\n{meta}{path}{body}</retrieved_note>\n"


def render_markdown(result: FocusContextResult, max_depth: int) -> str:
    """The whole ``<focus_context>`` document (``render(result, config)``)."""
    parts = [
        "<focus_context>\n",
        "Purpose: Context around the focus note for AI use.\n",
        f"Max depth: {max_depth}\n",
        render_focus_note(result.focus_note),
    ]
    parts += (f"\n---\n{_retrieved_note(note)}" for note in result.related_notes)
    return "".join(parts) + "</focus_context>\n"


def render_related_notes(notes: Iterable[RelatedNoteOut], max_depth: int) -> str:
    """The ``<related_notes>`` block (``renderRelatedNotes``); ``""`` for no notes."""
    blocks = [_retrieved_note(note) for note in notes]
    if not blocks:
        return ""
    head = "<related_notes>\nPurpose: Notes related to the session items, for tutor context.\n"
    return f"{head}Max depth: {max_depth}\n{''.join(blocks)}</related_notes>\n"
