"""A read on Doughnut's own context paths, for one of Doughnut's users, in Doughnut's order.

``GET /api/notes/{note}/graph`` and ``/ai-context-markdown`` (commit b2c0268c09): Spring binds the
path's note first (converted to an Integer, then looked up: a row, deleted or not), then the
required ``tokenLimit`` (an ``int``), and only then does Doughnut find the user (a token, then the
web session: service.sessions) and check the read rule on the note's notebook; the answer is the
context computed with that user as viewer. :func:`answer` keeps that order, so every refusal is
the one Doughnut gives first (:class:`Refusal`; service.doughnut_errors writes Doughnut's bodies
for them):

* ``bad-note`` / ``no-note``: the path value does not convert, or names no row;
* ``no-limit`` / ``bad-limit``: ``tokenLimit`` is absent or does not convert. Zero and negative
  limits are accepted, as Doughnut accepts them; its computation treats every limit up to 0 alike
  (an empty focus body, nothing related), so they are answered as 0;
* ``not-logged-in`` (nobody, and the notebook is not in the bazaar) / ``forbidden`` (a user who may
  not read it).

A deleted note is answered like a live one, as Doughnut answers it (its snapshot was removed when it
was deleted, so it is computed live and not stored).
"""

from __future__ import annotations

from dataclasses import dataclass

from graphrag import GraphRagError, NoteNotFound
from graphrag.wiki.focus.types import NoteNotReadable
from graphrag.wiki.model import WikiNeed
from graphrag.wiki.view import WikiView
from service.ports import NoteSource
from service.reader import Served, SnapshotReader
from service.sessions import Viewers

__all__ = ["Refusal", "answer", "cached_answer", "parse_java_int"]

_INT32 = 2**31
#: Java's Character.isWhitespace, which Spring's StringUtils.trimAllWhitespace removes everywhere
_JAVA_WHITESPACE = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \u1680\u2000\u2001\u2002\u2003\u2004"
                             "\u2005\u2006\u2008\u2009\u200a\u2028\u2029\u205f\u3000")


class Refusal(Exception):
    """Why Doughnut would not answer with a context: ``kind`` (module docstring) and the raw value
    that did not convert (``bad-note``, ``bad-limit``)."""

    def __init__(self, kind: str, raw: str = "") -> None:
        super().__init__(kind)
        self.kind, self.raw = kind, raw


def parse_java_int(raw: str) -> int | None:
    """``raw`` as Spring converts a request value to a Java ``int``/``Integer``, or None: every
    whitespace character removed, then ``Integer.decode`` when it looks hexadecimal (``0x``, ``0X``
    or ``#`` after an optional ``-``), else ``Integer.valueOf`` (an optional sign and decimal
    digits); 32 bits."""
    text = "".join(c for c in raw if c not in _JAVA_WHITESPACE)
    if "_" in text or any(c.isspace() for c in text):  # int() takes these, Java does not
        return None
    at = 1 if text[:1] == "-" else 0
    try:
        if text.startswith(("0x", "0X", "#"), at):
            digits = text[at + (1 if text[at] == "#" else 2):]
            if digits[:1] in ("-", "+", ""):
                return None
            value = int(digits, 16) * (-1 if at else 1)
        else:
            value = int(text, 10)
    except ValueError:
        return None
    return value if -_INT32 <= value < _INT32 else None


@dataclass(frozen=True, slots=True)
class DoughnutRead:
    """One request: the raw path value, the raw ``tokenLimit`` (None: absent), the bearer token
    (None: none), the format (``json`` for /graph, ``markdown`` for /ai-context-markdown) and the
    ``Cookie`` header (Doughnut's web session, service.sessions)."""

    note: str
    token_limit: str | None
    bearer: str | None
    fmt: str
    cookie: str | None = None


def _has_row(source: NoteSource, note_id: int) -> bool:
    """Whether ``note`` has a row, deleted or not (what Spring's lookup of the path finds)."""
    if note_id <= 0:
        return False
    view = WikiView()
    with source.batch() as load:
        load(view, WikiNeed.of(notes={note_id}))
    return view.note(note_id) is not None


def answer(reader: SnapshotReader, viewers: Viewers, read: DoughnutRead) -> Served:
    """The context Doughnut returns for ``read``, or the :class:`Refusal` it answers first.

    Whether the note has a row is asked of the database only when something else is refused
    first here (a ``tokenLimit``, a user who cannot be found): a read is answered by the reader,
    which finds no row exactly when a snapshot or a live computation finds none (NoteNotFound),
    so a hit runs no SQL."""
    note_id = parse_java_int(read.note)
    if note_id is None:
        raise Refusal("bad-note", read.note)
    store = reader.service.store
    limit = _limit(read.token_limit)
    if isinstance(limit, Refusal):
        raise limit if _has_row(store, note_id) else Refusal("no-note")
    if note_id <= 0:
        raise Refusal("no-note")
    try:
        viewer = viewers.viewer_of(read.bearer, read.cookie)
    except GraphRagError:
        if not _has_row(store, note_id):
            raise Refusal("no-note") from None
        raise
    try:
        return reader.get(note_id, token_limit=max(0, limit), viewer=viewer, fmt=read.fmt,
                          doughnut=True)
    except NoteNotFound as err:
        raise Refusal("no-note") from err
    except NoteNotReadable as err:
        raise Refusal("not-logged-in" if viewer.anonymous else "forbidden") from err


def cached_answer(reader: SnapshotReader, viewers: Viewers, read: DoughnutRead) -> Served | None:
    """:func:`answer`'s answer when the reader has it without asking anybody (a fresh hit read
    by the snapshot's own viewer, or another reader's remembered answer: SnapshotReader.cached)
    for a reader known without asking (a remembered token, or nobody: Viewers.known); None when
    anything else would decide (then :func:`answer` does)."""
    note_id, limit = parse_java_int(read.note), _limit(read.token_limit)
    if note_id is None or note_id <= 0 or isinstance(limit, Refusal):
        return None
    viewer = viewers.known(read.bearer, read.cookie)
    if viewer is None:
        return None
    return reader.cached(note_id, token_limit=max(0, limit), viewer=viewer, fmt=read.fmt,
                         doughnut=True)


def _limit(raw: str | None) -> int | Refusal:
    """The ``tokenLimit`` as Spring converts it, or the refusal of a missing or bad one."""
    if raw is None:
        return Refusal("no-limit")
    limit = parse_java_int(raw)
    return Refusal("bad-limit", raw) if limit is None else limit
