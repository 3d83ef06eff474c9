"""A trace's wiki ladder in the three forms a trace comes in, each read as columns by a replay.

A replay's selection (graphrag.wiki.focus.cut) reads the ladder's note ids and depths and nothing
else; only the steps it shows need a retrieval path, and a JSON answer needs that path as the bytes
Doughnut writes. So every form answers :class:`Ladder`: ``ids`` and ``depths`` as lists, a step's
path as a tuple (markdown, equality) and as its JSON array (:meth:`Ladder.path_json`), and the
steps themselves as a :class:`~collections.abc.Sequence` of :class:`WikiStep`:

* :class:`BuiltLadder`: the steps a computation built; a path's JSON is written when first asked
  (as for :class:`DictLadder`).
* :class:`LineLadder`: a stored trace's (format 3): ids and depths from its first line, each step's
  path JSON a line of its own, joined into an answer as it is and parsed only when a step is read.
* :class:`DictLadder`: a trace stored before format 3 (a list of ``{"id", "depth", "path"}``).

A step, a path tuple or a path's JSON is kept by its index once built, so threads sharing one parsed
trace build equal values, never misplaced ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

from graphrag.core.jsonload import loads
from graphrag.wiki.focus.fields import WikiStep
from graphrag.wiki.focus.render import path_json

__all__ = ["BuiltLadder", "DictLadder", "Ladder", "LineLadder"]


class Ladder(Sequence[WikiStep]):
    """The wiki ladder of a trace, in emission order (module docstring)."""

    def __init__(self, ids: Sequence[int], depths: Sequence[int]) -> None:
        self.ids, self.depths = ids, depths
        self._written: dict[int, bytes] = {}

    def path(self, index: int) -> tuple[str, ...]:
        """Step ``index``'s retrieval path."""
        raise NotImplementedError

    def path_json(self, index: int) -> bytes:
        """Step ``index``'s retrieval path as a JSON array (render.path_json), written when first
        asked for."""
        written = self._written.get(index)
        if written is None:
            written = self._written[index] = path_json(self.path(index))
        return written

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> WikiStep: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[WikiStep]: ...

    def __getitem__(self, index: int | slice) -> WikiStep | Sequence[WikiStep]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = index + len(self) if index < 0 else index
        if not 0 <= index < len(self):
            raise IndexError("wiki step index out of range")
        return WikiStep(self.ids[index], self.depths[index], self.path(index))

    def __iter__(self) -> Iterator[WikiStep]:
        return map(self.__getitem__, range(len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class BuiltLadder(Ladder):
    """The steps a computation built."""

    def __init__(self, steps: Sequence[WikiStep]) -> None:
        self._steps = tuple(steps)
        super().__init__([s.note_id for s in self._steps], [s.depth for s in self._steps])

    def path(self, index: int) -> tuple[str, ...]:
        return self._steps[index].path


class LineLadder(Ladder):
    """A stored trace's ladder: ``ids`` and ``depths`` as its first line lists them, ``lines``
    each step's path as a JSON array (the caller checks the columns' types and lengths)."""

    def __init__(self, ids: Sequence[int], depths: Sequence[int], lines: Sequence[bytes]) -> None:
        if not len(ids) == len(depths) == len(lines):
            raise ValueError("a trace's ladder columns differ in length")
        super().__init__(ids, depths)
        self._lines = lines
        self._paths: dict[int, tuple[str, ...]] = {}

    def path(self, index: int) -> tuple[str, ...]:
        held = self._paths.get(index)
        if held is None:
            held = self._paths[index] = _path_in(self._lines[index])
        return held

    def path_json(self, index: int) -> bytes:
        return self._lines[index]


def _path_in(line: bytes) -> tuple[str, ...]:
    try:
        path = loads(line)
    except ValueError as err:
        raise ValueError("a trace's retrieval path is not JSON") from err
    if not isinstance(path, list) or not all(isinstance(uri, str) for uri in path):
        raise ValueError("a trace's retrieval path is not a list of texts")
    return tuple(path)


class DictLadder(Ladder):
    """A ladder stored before format 3: one ``{"id", "depth", "path"}`` per step (checked by the
    caller)."""

    def __init__(self, data: Sequence[Mapping[str, Any]]) -> None:
        self._data = data
        super().__init__([int(s["id"]) for s in data], [int(s["depth"]) for s in data])

    def path(self, index: int) -> tuple[str, ...]:
        return tuple(self._data[index]["path"])
