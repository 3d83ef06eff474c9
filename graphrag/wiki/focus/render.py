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

from graphrag.wiki.approx_tokens import join_surrogates
from graphrag.wiki.focus.types import FocusContextResult, FocusNoteOut, RelatedNoteOut

__all__ = [
    "iso_instant",
    "json_string",
    "markdown_json",
    "render_focus_note",
    "render_markdown",
    "render_related_notes",
    "result_json",
    "safe_fence",
]

_ESCAPED = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')
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


def json_string(text: str) -> bytes:
    """A JSON string literal exactly as Jackson 3's UTF-8 generator writes ``text``."""
    return b'"' + _ESCAPED.sub(_escape, join_surrogates(text)).encode("utf-8") + b'"'


def iso_instant(epoch_ms: int) -> str:
    """``yyyy-MM-ddTHH:mm:ss.SSSZ`` in UTC."""
    moment = _EPOCH + timedelta(milliseconds=epoch_ms)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
        f"{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def _array(items: Iterable[str]) -> bytes:
    return b"[" + b",".join(map(json_string, items)) + b"]"


def _members(pairs: Iterable[tuple[str, bytes | None]]) -> bytes:
    """A JSON object of the non-null members, in the given order."""
    return b"{" + b",".join(b'"' + k.encode() + b'":' + v for k, v in pairs if v is not None) + b"}"


def _optional(text: str | None) -> bytes | None:
    return None if text is None else json_string(text)


def _bool(value: bool) -> bytes:
    return b"true" if value else b"false"


def _focus_json(f: FocusNoteOut) -> bytes:
    return _members(
        [
            ("notebook", _optional(f.notebook)),
            ("title", json_string(f.title)),
            ("folderPath", json_string(f.folder_path)),
            ("depth", str(f.depth).encode()),
            ("outgoingLinks", _array(f.outgoing_links)),
            ("inboundReferences", _array(f.inbound_references)),
            ("sampleSiblings", _array(f.sample_siblings)),
            ("createdAt", json_string(iso_instant(f.created_at_ms))),
            ("content", _optional(f.content)),
            ("contentTruncated", _bool(f.content_truncated)),
        ]
    )


def _related_json(n: RelatedNoteOut) -> bytes:
    return _members(
        [
            ("notebook", _optional(n.notebook)),
            ("title", json_string(n.title)),
            ("folderPath", json_string(n.folder_path)),
            ("depth", str(n.depth).encode()),
            ("retrievalPath", _array(n.retrieval_path)),
            ("createdAt", json_string(iso_instant(n.created_at_ms))),
            ("content", _optional(n.content)),
            ("contentTruncated", _bool(n.content_truncated)),
        ]
    )


def result_json(result: FocusContextResult) -> bytes:
    """The ``/graph`` response body."""
    related = b"[" + b",".join(map(_related_json, result.related_notes)) + b"]"
    return b'{"focusNote":' + _focus_json(result.focus_note) + b',"relatedNotes":' + related + b"}"


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
