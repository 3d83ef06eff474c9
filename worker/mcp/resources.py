"""Each note's context as an MCP resource: its URI, its templates, and reading it.

``doughnut://notes/{noteId}/context?tokenLimit={n}`` is the JSON ``get_note_graph`` answers for the
note and limit (``application/json``); ``&format=markdown`` the markdown
``get_note_context_markdown`` answers (``text/markdown``). Both are read through the same
:class:`worker.mcp.source.ContextSource` as the tools, so a resource's bytes are the tool's bytes and
follow the same rules (cache, stale or live; the same refusals). The URI is parsed strictly: any other
scheme, path, parameter or a tokenLimit that is not a whole number above 5 is refused with a message
naming what is wrong, never guessed at, and so is another spelling of a valid URI (parameters in
another order, ``format=json``, leading zeros): the message gives the one spelling. A resource's
:func:`digest` is what subscriptions compare to tell a change of its bytes from a rebuild that wrote
the same ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

import mcp_types as types

from graphrag import InvalidParameter
from worker.mcp.source import Answer, ContextSource

__all__ = [
    "JSON_TEMPLATE", "MARKDOWN_TEMPLATE", "NoteResource", "answer", "digest", "parse_uri", "read",
    "templates",
]

JSON_TEMPLATE = "doughnut://notes/{noteId}/context?tokenLimit={tokenLimit}"
MARKDOWN_TEMPLATE = JSON_TEMPLATE + "&format=markdown"
_MIME = {"json": "application/json", "markdown": "text/markdown"}


@dataclass(frozen=True, slots=True)
class NoteResource:
    """One note's context at one tokenLimit in one format."""

    note_id: int
    token_limit: int
    fmt: str = "json"

    @property
    def uri(self) -> str:
        tail = "&format=markdown" if self.fmt == "markdown" else ""
        return f"doughnut://notes/{self.note_id}/context?tokenLimit={self.token_limit}{tail}"

    @property
    def mime_type(self) -> str:
        return _MIME[self.fmt]


#: more digits than any id or tokenLimit has (and far below what int() refuses to convert)
_MAX_DIGITS = 20


def _whole(name: str, text: str, low: int) -> int:
    """``text`` as a whole number above ``low``: ASCII digits only, and not too many of them."""
    if not (text.isascii() and text.isdigit()) or len(text) > _MAX_DIGITS or int(text) <= low:
        raise InvalidParameter(name, f"{text[:32]!r} is not a whole number above {low}")
    return int(text)


def _query(query: str) -> tuple[int, str]:
    params = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    names = [name for name, _ in params]
    if sorted(set(names)) != sorted(names) or not set(names) <= {"tokenLimit", "format"}:
        raise InvalidParameter("uri", "takes tokenLimit and, optionally, format, each once")
    values = dict(params)
    if "tokenLimit" not in values:
        raise InvalidParameter("tokenLimit", "is required")
    fmt = values.get("format", "json")
    if fmt not in _MIME:
        raise InvalidParameter("format", f"{fmt!r} is neither json nor markdown")
    return _whole("tokenLimit", values["tokenLimit"], 5), fmt


def parse_uri(uri: str) -> NoteResource:
    """The resource a URI names; raises InvalidParameter naming what is wrong."""
    try:
        parts = urlsplit(uri)
        segments = parts.path.split("/")
        if parts.scheme != "doughnut" or parts.netloc != "notes" or len(segments) != 3 \
                or segments[0] or segments[2] != "context" or parts.fragment:
            raise InvalidParameter("uri", f"{uri!r} is not doughnut://notes/{{noteId}}/context?...")
        limit, fmt = _query(parts.query)
    except ValueError as err:  # urlsplit/parse_qsl on malformed text
        raise InvalidParameter("uri", f"{uri!r} is malformed: {err}") from err
    resource = NoteResource(_whole("noteId", segments[1], -1), limit, fmt)
    if resource.uri != uri:  # one spelling per resource: notifications carry the URI subscribed to
        raise InvalidParameter("uri", f"{uri!r} is written {resource.uri!r}")
    return resource


def templates() -> list[types.ResourceTemplate]:
    """The two templates ``resources/templates/list`` answers."""
    return [
        types.ResourceTemplate(
            uri_template=JSON_TEMPLATE, name="note-context", title="A note's context (JSON)",
            description="The context around a focus note within tokenLimit tokens, as "
                        "get_note_graph answers it; subscribe to hear when it changes.",
            mime_type=_MIME["json"]),
        types.ResourceTemplate(
            uri_template=MARKDOWN_TEMPLATE, name="note-context-markdown",
            title="A note's context (markdown)",
            description="The same context as get_note_context_markdown answers it; subscribe to "
                        "hear when it changes.",
            mime_type=_MIME["markdown"]),
    ]


def answer(source: ContextSource, resource: NoteResource) -> Answer:
    """The answer behind a resource (blocks: SQL or Redis); raises as the source does."""
    fetch = source.markdown if resource.fmt == "markdown" else source.graph
    return fetch(resource.note_id, resource.token_limit)


def read(source: ContextSource, resource: NoteResource) -> types.ReadResourceResult:
    """``resources/read``: the resource's text, as the tool would answer it."""
    served = answer(source, resource)
    contents = types.TextResourceContents(uri=resource.uri, mime_type=resource.mime_type,
                                          text=served.body.decode("utf-8"))
    return types.ReadResourceResult(contents=[contents])


def digest(body: bytes) -> bytes:
    """What a subscription compares: equal exactly when the bytes are."""
    return hashlib.blake2b(body, digest_size=16).digest()
