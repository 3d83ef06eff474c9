"""The budget-independent trace of one focus-context computation, and its JSON form.

A :class:`Trace` holds everything Doughnut's procedure reads for any combined budget from 1 up to
``max_token_limit``, so :func:`graphrag.wiki.focus.cut.cut` replays the procedure for any such budget
without the database:

* the focus's rendered fields, its body cut to ``min(focus cap, max_token_limit)`` tokens (a smaller
  budget cuts it again: re-truncation equals truncating the original, see
  :mod:`graphrag.wiki.approx_tokens`) and whether that already shortened it;
* the focus's outgoing, inbound (cap 20) and sibling (cap 6) URI lists;
* the wiki ladder: every wiki note any budget can emit, in emission order, with depth and path. Depth
  d+1 only runs when every note of depth d got in, so the notes emitted for a wiki budget W are
  exactly the ladder entries whose preceding costs sum to less than W;
* per peer group (a folder, or a notebook root), a prefix of its live members in sampling order long
  enough for every anchor's cap after excluding any set of claimed notes;
* per note, the fields a related note shows and its cost;
* the facts read (``note:X``, ``links:P``, ``inbound:T``, ``peers:<notebook>:<folder|root>``,
  ``folder:F``, ``notebook:N``) for exact invalidation.

The stored form (:meth:`Trace.to_bytes`, format 2) is one compact JSON line of everything but the
notes' fields (their ids, costs and groups as three lists), then two lines per note: the note's
members as every answer writes them, before ``depth`` and after ``retrievalPath``
(:attr:`NoteFields.fragments`). Compact JSON never holds a raw newline, so the lines split without
parsing; a replay's cut reads costs and groups from the first line and its JSON answer joins the
shown notes' lines (graphrag.wiki.focus.cut.cut_json): of the tens of notes a trace holds, it parses
none. Each note's fragments are rendered once per view and shared by every trace that holds it.

The JSON form (:meth:`Trace.to_json`, format 1: the notes inside, note ids as dict keys in decimal)
is what snapshots held before format 2; it is still read. There a body that ends in half of a
surrogate pair (a Java cut can leave one) is not valid UTF-8, so such a text is stored as
``{"utf16le": "<hex>"}`` instead of a string; a fragment writes it as Jackson does (``\\uD83D``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, overload

import orjson

from graphrag.core.jsonload import loads
from graphrag.wiki.focus.render import note_fragments
from graphrag.wiki.focus.types import FocusContextParams
from graphrag.wiki.model import Viewer

__all__ = [
    "JSON_FORMAT", "TRACE_FORMAT", "FocusFields", "NoteFields", "PeerList", "Trace", "WikiStep",
    "group_key",
]

TRACE_FORMAT = 2
#: the JSON form (:meth:`Trace.to_json`), one document with the notes inside
JSON_FORMAT = 1
_SURROGATE = re.compile("[\ud800-\udfff]")
_EPOCH, _MS = datetime(1970, 1, 1, tzinfo=UTC), timedelta(milliseconds=1)


def group_key(notebook_id: int | None, folder_id: int | None) -> str:
    """``<notebook>:<folder|root>``, the name of a peer group (and of its ``peers:`` fact)."""
    return (
        f"{'none' if notebook_id is None else notebook_id}:{'root' if folder_id is None else folder_id}"
    )


@dataclass(frozen=True)
class NoteFields:
    """A related note as it is shown (body cut to the related cap), its cost and peer group."""

    notebook: str | None
    title: str
    folder_path: str
    created_at_ms: int
    content: str | None
    content_truncated: bool
    cost: int
    group: str | None

    @cached_property
    def json_form(self) -> dict[str, Any]:
        """The note's member of a trace's ``notes``, built once per instance: a view derives a
        note's fields once (graphrag.wiki.focus.walk) and every trace showing the note writes
        them. Shared: read it, never change it."""
        return _note_out(self)

    @cached_property
    def fragments(self) -> tuple[bytes, bytes]:
        """The note's JSON members as every answer shows it, around its depth and path
        (graphrag.wiki.focus.render.note_fragments), built once per instance."""
        return note_fragments(self.notebook, self.title, self.folder_path, self.created_at_ms,
                              self.content, self.content_truncated)


@dataclass(frozen=True)
class FocusFields:
    """The focus as shown, its body cut to the trace's focus cap; ``content_shortened`` is true when
    that cut already shortened the body (so every smaller cut is marked truncated)."""

    notebook: str | None
    title: str
    folder_path: str
    created_at_ms: int
    content: str | None
    content_shortened: bool
    group: str | None


@dataclass(frozen=True)
class WikiStep:
    """One wiki-reached note in emission order: depth and retrieval path (ending at the note)."""

    note_id: int
    depth: int
    path: tuple[str, ...]


@dataclass(frozen=True)
class PeerList:
    """A prefix of a group's live members in sampling order; ``complete`` when it is all of them."""

    ids: tuple[int, ...]
    complete: bool


@dataclass(frozen=True)
class Trace:
    """Everything a focus-context result depends on, for every budget up to ``max_token_limit``.

    ``sample_siblings`` is None when no such budget leaves room for folder peers (not loaded).
    ``wiki_complete`` is false when the ladder stops because no budget can reach further.
    """

    params: FocusContextParams
    focus_id: int
    seed: int | None
    viewer: Viewer
    max_depth: int
    max_token_limit: int
    focus: FocusFields
    outgoing_links: tuple[str, ...]
    inbound_references: tuple[str, ...]
    sample_siblings: tuple[str, ...] | None
    wiki: Sequence[WikiStep]
    wiki_complete: bool
    notes: Mapping[int, NoteFields]
    groups: Mapping[str, PeerList]
    facts: frozenset[str]

    def cost_of(self, note_id: int) -> int | None:
        """A note's cost, None when the trace holds no fields of it (not read from them)."""
        if isinstance(self.notes, _LineNotes):
            return self.notes.cost(note_id)
        fields = self.notes.get(note_id)
        return None if fields is None else fields.cost

    def group_of(self, note_id: int) -> str | None:
        """A held note's peer group."""
        if isinstance(self.notes, _LineNotes):
            return self.notes.group(note_id)
        return self.notes[note_id].group

    def fragments_of(self, note_id: int) -> tuple[bytes, bytes]:
        """A held note's JSON members around its depth and path (NoteFields.fragments)."""
        if isinstance(self.notes, _LineNotes):
            return self.notes.fragments(note_id)
        return self.notes[note_id].fragments

    def to_bytes(self) -> bytes:
        """The stored form: a JSON line of everything but the notes' fields (``noteIds``,
        ``noteCosts`` and ``noteGroups`` in their place), then each note's two fragments
        (:attr:`NoteFields.fragments`) a line each, in ``noteIds`` order. Compact JSON never holds
        a raw newline, so a replay splits the lines and parses only the notes it shows."""
        ids = sorted(self.notes)
        spine = self._spine(TRACE_FORMAT) | {
            "noteIds": ids, "noteCosts": [self.notes[i].cost for i in ids],
            "noteGroups": [self.notes[i].group for i in ids]}
        lines = (part for i in ids for part in self.notes[i].fragments)
        return orjson.dumps(spine) + b"\n" + b"\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (format 1): one document, the notes' fields inside."""
        return self._spine(JSON_FORMAT) | {
            "notes": {str(i): n.json_form for i, n in sorted(self.notes.items())}}

    def _spine(self, form: int) -> dict[str, Any]:
        return {
            "format": form,
            "params": self.params.to_json(),
            "focusId": self.focus_id,
            "seed": self.seed,
            "viewer": self.viewer.to_json(),
            "maxDepth": self.max_depth,
            "maxTokenLimit": self.max_token_limit,
            "focus": _focus_out(self.focus),
            "outgoingLinks": list(self.outgoing_links),
            "inboundReferences": list(self.inbound_references),
            "sampleSiblings": None if self.sample_siblings is None else list(self.sample_siblings),
            "wiki": [{"id": s.note_id, "depth": s.depth, "path": list(s.path)} for s in self.wiki],
            "wikiComplete": self.wiki_complete,
            "groups": {k: {"ids": list(g.ids), "complete": g.complete} for k, g in self.groups.items()},
            "facts": sorted(self.facts),
        }

    @staticmethod
    def from_bytes(data: bytes) -> Trace:
        """A trace from its stored form (:meth:`to_bytes`), or from its JSON form's bytes (a
        snapshot written before format 2); ValueError when it is neither."""
        at = data.find(b"\n")
        if at < 0:
            return Trace.from_json(loads(data))
        spine, rest = loads(data[:at]), data[at + 1:]
        if spine.get("format") != TRACE_FORMAT:
            raise ValueError(f"unknown trace format {spine.get('format')!r}")
        notes = _LineNotes(spine["noteIds"], spine["noteCosts"], spine["noteGroups"],
                           rest.split(b"\n") if rest else [])
        return _parsed(spine, notes)

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Trace:
        """A trace from its JSON form (format 1)."""
        if data.get("format") != JSON_FORMAT:
            raise ValueError(f"unknown trace format {data.get('format')!r}")
        return _parsed(data, _Notes(data["notes"]))


def _parsed(data: Mapping[str, Any], notes: Mapping[int, NoteFields]) -> Trace:
    siblings = data["sampleSiblings"]
    return Trace(
        params=FocusContextParams.from_json(dict(data["params"])),
        focus_id=int(data["focusId"]),
        seed=data["seed"],
        viewer=Viewer.from_json(data["viewer"]),
        max_depth=int(data["maxDepth"]),
        max_token_limit=int(data["maxTokenLimit"]),
        focus=_focus_in(data["focus"]),
        outgoing_links=tuple(data["outgoingLinks"]),
        inbound_references=tuple(data["inboundReferences"]),
        sample_siblings=None if siblings is None else tuple(siblings),
        wiki=_Steps(data["wiki"]),
        wiki_complete=bool(data["wikiComplete"]),
        notes=notes,
        groups={k: PeerList(tuple(g["ids"]), bool(g["complete"])) for k, g in data["groups"].items()},
        facts=frozenset(data["facts"]),
    )


class _LineNotes(Mapping[int, NoteFields]):
    """A stored trace's notes: costs and groups from the first line, each note's fields parsed
    from its two fragment lines when it is first read (a replay's JSON joins the fragments as
    they are and parses none)."""

    def __init__(self, ids: Sequence[int], costs: Sequence[int], groups: Sequence[str | None],
                 lines: Sequence[bytes]) -> None:
        if not len(ids) == len(costs) == len(groups) or len(lines) != 2 * len(ids):
            raise ValueError("a trace's note lines do not match its note ids")
        self._index = {int(i): k for k, i in enumerate(ids)}
        self._costs, self._groups, self._lines = costs, groups, lines
        self._built = dict[int, NoteFields]()

    def cost(self, note_id: int) -> int | None:
        k = self._index.get(note_id)
        return None if k is None else int(self._costs[k])

    def group(self, note_id: int) -> str | None:
        return self._groups[self._index[note_id]]

    def fragments(self, note_id: int) -> tuple[bytes, bytes]:
        k = 2 * self._index[note_id]
        return self._lines[k], self._lines[k + 1]

    def __getitem__(self, note_id: int) -> NoteFields:
        try:
            return self._built[note_id]
        except KeyError:
            head, tail = self.fragments(note_id)
            built = self._built[note_id] = _fields_in(head, tail, self.cost(note_id) or 0,
                                                      self.group(note_id))
            return built

    def __iter__(self) -> Iterator[int]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, note_id: object) -> bool:
        return note_id in self._index


def _fields_in(head: bytes, tail: bytes, cost: int, group: str | None) -> NoteFields:
    d = loads(b"{" + head + b"," + tail + b"}")
    return NoteFields(d.get("notebook"), d["title"], d["folderPath"], _epoch_ms(d["createdAt"]),
                      d.get("content"), bool(d["contentTruncated"]), cost, group)


def _epoch_ms(instant: str) -> int:
    """The epoch milliseconds of ``yyyy-MM-ddTHH:mm:ss.SSSZ`` (render.iso_instant's form)."""
    moment = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    return (moment - _EPOCH) // _MS


class _Notes(Mapping[int, NoteFields]):
    """A parsed trace's notes, each built when it is first read: a replay reads the few its cut
    shows, not the tens the trace holds."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data, self._built = data, dict[int, NoteFields]()

    def __getitem__(self, note_id: int) -> NoteFields:
        try:
            return self._built[note_id]
        except KeyError:
            built = self._built[note_id] = _note_in(self._data[str(note_id)])
            return built

    def __iter__(self) -> Iterator[int]:
        return map(int, self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, note_id: object) -> bool:
        return str(note_id) in self._data


class _Steps(Sequence[WikiStep]):
    """A parsed trace's wiki ladder, each step built when it is first reached: a replay walks
    only the prefix its budget emits. (Like :class:`_Notes`, it builds on read: a parsed trace is
    one read's, never shared between threads.)"""

    def __init__(self, data: Sequence[Mapping[str, Any]]) -> None:
        self._data, self._built = data, list[WikiStep]()

    def __len__(self) -> int:
        return len(self._data)

    @overload
    def __getitem__(self, index: int) -> WikiStep: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[WikiStep]: ...

    def __getitem__(self, index: int | slice) -> WikiStep | Sequence[WikiStep]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = index + len(self._data) if index < 0 else index
        if not 0 <= index < len(self._data):
            raise IndexError("wiki step index out of range")
        while len(self._built) <= index:
            s = self._data[len(self._built)]
            self._built.append(WikiStep(int(s["id"]), int(s["depth"]), tuple(s["path"])))
        return self._built[index]

    def __iter__(self) -> Iterator[WikiStep]:
        built = self._built
        for index, s in enumerate(self._data):
            if index == len(built):
                built.append(WikiStep(int(s["id"]), int(s["depth"]), tuple(s["path"])))
            yield built[index]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


def _text_out(text: str | None) -> str | dict[str, str] | None:
    if text is None or _SURROGATE.search(text) is None:
        return text
    return {"utf16le": text.encode("utf-16-le", "surrogatepass").hex()}


def _text_in(value: str | Mapping[str, str] | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return bytes.fromhex(value["utf16le"]).decode("utf-16-le", "surrogatepass")


def _focus_out(f: FocusFields) -> dict[str, Any]:
    return {
        "notebook": f.notebook,
        "title": f.title,
        "folderPath": f.folder_path,
        "createdAtMs": f.created_at_ms,
        "content": _text_out(f.content),
        "contentShortened": f.content_shortened,
        "group": f.group,
    }


def _focus_in(d: Mapping[str, Any]) -> FocusFields:
    return FocusFields(
        d["notebook"],
        d["title"],
        d["folderPath"],
        int(d["createdAtMs"]),
        _text_in(d["content"]),
        bool(d["contentShortened"]),
        d["group"],
    )


def _note_out(n: NoteFields) -> dict[str, Any]:
    return {
        "notebook": n.notebook,
        "title": n.title,
        "folderPath": n.folder_path,
        "createdAtMs": n.created_at_ms,
        "content": _text_out(n.content),
        "contentTruncated": n.content_truncated,
        "cost": n.cost,
        "group": n.group,
    }


def _note_in(d: Mapping[str, Any]) -> NoteFields:
    return NoteFields(
        d["notebook"],
        d["title"],
        d["folderPath"],
        int(d["createdAtMs"]),
        _text_in(d["content"]),
        bool(d["contentTruncated"]),
        int(d["cost"]),
        d["group"],
    )
