"""A trace's notes, each note's fields built when they are first read (graphrag.wiki.focus.trace;
its ladder: graphrag.wiki.focus.ladder).

Every trace's notes answer one interface, :class:`HeldNotes`: a note's cost, group and answer
fragments, and the least cost, each from what that form holds. :class:`FieldNotes` holds the
fields a computation built.

A replay reads a few of the tens of notes a trace holds. From the stored
form, :class:`LineNotes` reads costs and groups from the first line's lists and cuts a note's two
fragment lines out of the rest by the lengths the first line lists (:class:`Lines`); a JSON answer
joins those bytes, and a note's fields are parsed from them only when something asks for the note
itself (markdown, equality). From the JSON form, :class:`JsonNotes` builds a note's fields from its
member when it is first read. What is built is kept by its key, so threads sharing a parsed
trace (an envelope's, cached on it) build equal values, never misplaced ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from typing import Any, Protocol, overload

from graphrag.core.jsonload import loads
from graphrag.wiki.focus.fields import NoteFields

__all__ = ["FieldNotes", "HeldNotes", "JsonNotes", "LineNotes", "Lines", "ListedFacts", "text_in"]

_EPOCH, _MS = datetime(1970, 1, 1, tzinfo=UTC), timedelta(milliseconds=1)


class HeldNotes(Protocol):
    """A trace's notes by id (a :class:`~collections.abc.Mapping` to their fields) and what a cut
    reads of them without building their fields where the stored form spares it."""

    def __getitem__(self, note_id: int) -> NoteFields: ...
    def __iter__(self) -> Iterator[int]: ...
    def __len__(self) -> int: ...
    def __contains__(self, note_id: object) -> bool: ...
    def items(self) -> Any: ...

    def cost(self, note_id: int) -> int | None:
        """A note's cost, None when the trace holds no fields of it."""

    def group(self, note_id: int) -> str | None:
        """A held note's peer group."""

    def fragments(self, note_id: int) -> tuple[bytes, bytes]:
        """A held note's JSON members around its depth and path (NoteFields.fragments)."""

    def least_cost(self) -> int:
        """The smallest cost of a held note (0 when none is held)."""


class FieldNotes(Mapping[int, NoteFields]):
    """The notes of a trace a computation built: their fields, each read from them."""

    def __init__(self, fields: Mapping[int, NoteFields]) -> None:
        self._fields = fields

    def cost(self, note_id: int) -> int | None:
        held = self._fields.get(note_id)
        return None if held is None else held.cost

    def group(self, note_id: int) -> str | None:
        return self._fields[note_id].group

    def fragments(self, note_id: int) -> tuple[bytes, bytes]:
        return self._fields[note_id].fragments

    def least_cost(self) -> int:
        return min((n.cost for n in self._fields.values()), default=0)

    def __getitem__(self, note_id: int) -> NoteFields:
        return self._fields[note_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        return f"FieldNotes({self._fields!r})"


class Lines(Sequence[bytes]):
    """The lines of ``data`` from byte ``start`` on (a stored trace's after its first line), cut out
    by the lengths it lists when they are read (a replay reads a few of a hundred); nothing is
    copied before."""

    def __init__(self, data: bytes, lengths: Sequence[int], start: int = 0) -> None:
        # line i is data[ends[i] + start + i:ends[i + 1] + start + i] (i newlines before it)
        self._data, self._ends = data, list(accumulate(lengths, initial=0))
        if (start + self._ends[-1] + max(len(lengths) - 1, 0) != len(data)
                or min(lengths, default=0) < 0):
            raise ValueError("a trace's lines are not the lengths its first line lists")
        self._base, self._len = start, len(lengths)

    def part(self, begin: int, stop: int) -> Lines:
        """Lines ``begin`` to ``stop`` (within these), sharing these lines' bytes."""
        if not 0 <= begin <= stop <= self._len:
            raise ValueError("a trace's line range is out of its lines")
        part = Lines.__new__(Lines)
        part._data, part._ends = self._data, self._ends[begin:stop + 1]
        part._base, part._len = self._base + begin, stop - begin
        return part

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = index + self._len if index < 0 else index
        if not 0 <= index < self._len:
            raise IndexError("trace line index out of range")
        at = self._base + index
        return self._data[self._ends[index] + at:self._ends[index + 1] + at]

    def pair(self, index: int) -> tuple[bytes, bytes]:
        """Lines ``index`` and ``index + 1`` (both in range: the caller's to check)."""
        at, data, ends = self._base + index, self._data, self._ends
        middle = ends[index + 1] + at
        return data[ends[index] + at:middle], data[middle + 1:ends[index + 2] + at + 1]


class LineNotes(Mapping[int, NoteFields]):
    """A stored trace's notes: costs and groups from the first line, each note's fields parsed
    from its two fragment lines when it is first read (a replay's JSON joins the fragments as
    they are and parses none)."""

    def __init__(self, ids: Sequence[int], costs: Sequence[int], groups: Sequence[str | None],
                 lines: Lines) -> None:
        if not len(ids) == len(costs) == len(groups) or len(lines) != 2 * len(ids):
            raise ValueError("a trace's note lines do not match its note ids")
        self._index = dict(zip(ids, range(len(ids)), strict=True))  # (ids checked as ints)
        self._costs, self._groups, self._lines = costs, groups, lines
        self._built = dict[int, NoteFields]()

    def cost(self, note_id: int) -> int | None:
        k = self._index.get(note_id)
        return None if k is None else int(self._costs[k])

    def least_cost(self) -> int:
        return int(min(self._costs, default=0))

    def group(self, note_id: int) -> str | None:
        return self._groups[self._index[note_id]]

    def fragments(self, note_id: int) -> tuple[bytes, bytes]:
        return self._lines.pair(2 * self._index[note_id])

    def holds_all(self, note_ids: Iterable[int]) -> bool:
        """Whether every one of ``note_ids`` is held."""
        return all(map(self._index.__contains__, note_ids))

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


class JsonNotes(Mapping[int, NoteFields]):
    """A parsed trace's notes, each built when it is first read: a replay reads the few its cut
    shows, not the tens the trace holds."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data, self._built = data, dict[int, NoteFields]()

    def least_cost(self) -> int:
        return min((int(member["cost"]) for member in self._data.values()), default=0)

    def cost(self, note_id: int) -> int | None:
        return self[note_id].cost if note_id in self else None

    def group(self, note_id: int) -> str | None:
        return self[note_id].group

    def fragments(self, note_id: int) -> tuple[bytes, bytes]:
        return self[note_id].fragments

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


class ListedFacts(AbstractSet[str]):
    """A parsed trace's facts as its first line lists them, made a set when first asked (a replay
    never asks: a snapshot's header names them too, for the reverse index)."""

    def __init__(self, listed: Iterable[str]) -> None:
        self._listed = listed
        self._held: frozenset[str] | None = None

    def _set(self) -> frozenset[str]:
        if self._held is None:
            if not all(isinstance(f, str) for f in self._listed):
                raise ValueError("a trace's facts are not texts")
            self._held = frozenset(self._listed)
        return self._held

    def __contains__(self, fact: object) -> bool:
        return fact in self._set()

    def __iter__(self) -> Iterator[str]:
        return iter(self._set())

    def __len__(self) -> int:
        return len(self._set())

    def __repr__(self) -> str:
        return f"ListedFacts({sorted(self._set())!r})"


def text_in(value: str | Mapping[str, str] | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return bytes.fromhex(value["utf16le"]).decode("utf-16-le", "surrogatepass")


def _note_in(d: Mapping[str, Any]) -> NoteFields:
    return NoteFields(
        d["notebook"],
        d["title"],
        d["folderPath"],
        int(d["createdAtMs"]),
        text_in(d["content"]),
        bool(d["contentTruncated"]),
        int(d["cost"]),
        d["group"],
    )
