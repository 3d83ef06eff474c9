"""What the MCP server reads through: the :class:`ContextSource` port and its adapter over the
snapshot reader.

The tools never hold the reader itself: they call a ContextSource, which raises NoteNotFound,
InvalidParameter or another GraphRagError (anything else is a bug, which the server logs and answers as
an internal error) and may block on SQL or Redis, so the server calls it on a worker thread. Every
answer is a body with the source and age of the snapshot behind it (an :class:`Answer`), so the server
can say where it came from in ``_meta`` without touching the content. :class:`ReaderContext` answers
both tools from the reader itself, never from a second rendering path: ``get_note_graph`` gets the JSON
bytes ``GET /notes/{id}/graph`` serves, and ``get_note_context_markdown`` the markdown
``GET /notes/{id}/context.md`` serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Answer", "ContextSource", "GraphReader", "ReaderContext", "Rendered"]


class Answer(Protocol):
    """A body and where it came from (the reader's ``Served`` is one)."""

    @property
    def body(self) -> bytes: ...
    @property
    def source(self) -> str: ...
    @property
    def age_s(self) -> float: ...
    @property
    def reason(self) -> str | None: ...


class ContextSource(Protocol):
    """What the tools call. Raises NoteNotFound, InvalidParameter or another GraphRagError (e.g. the
    reader's Unavailable); may block (SQL, Redis), so the server calls it on a worker thread."""

    def graph(self, note_id: int, token_limit: int) -> Answer: ...
    def markdown(self, note_id: int, token_limit: int) -> Answer: ...


class GraphReader(Protocol):
    """The part of :class:`service.reader.SnapshotReader` :class:`ReaderContext` uses."""

    def get(self, note_id: int, *, token_limit: int | None = None, seed: int | None = None,
            strategy: str | None = None, fmt: str = "json", doughnut: bool = False) -> Any: ...


@dataclass(frozen=True, slots=True)
class Rendered:
    """A rendered body (UTF-8 markdown) with the source and age of the snapshot it came from, and
    why no snapshot was trusted (the change feed is behind), if so."""

    body: bytes
    source: str
    age_s: float
    reason: str | None = None


class ReaderContext:
    """The ContextSource over the snapshot reader, for one strategy (``None``: the reader's default,
    the first kept for the database's layout). Both tools are the reader's answers: the JSON bytes
    the HTTP reader serves, and the markdown ``GET /notes/{id}/context.md`` serves (rendered from the
    snapshot, so a cache hit runs no SQL)."""

    def __init__(self, reader: GraphReader, strategy: str | None = None) -> None:
        self.reader, self.strategy = reader, strategy

    def graph(self, note_id: int, token_limit: int) -> Answer:
        served: Answer = self.reader.get(note_id, token_limit=token_limit, strategy=self.strategy,
                                         doughnut=True)
        return served

    def markdown(self, note_id: int, token_limit: int) -> Answer:
        served = self.reader.get(note_id, token_limit=token_limit, strategy=self.strategy,
                                 fmt="markdown", doughnut=True)
        return Rendered((served.text or "").encode("utf-8"), served.source, served.age_s,
                        served.reason)
