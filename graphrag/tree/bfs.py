"""The relationship-BFS strategy (docs/algorithms.md, "Relationship-BFS").

Deterministic: the seed is accepted and ignored. In every wave each note already in the result, in
result order, expands once along the first fruitful relationship of its own ordered list, starting just
after the one it used last time (cyclically). A note counts as *taken* when it is in the result or was
found earlier in the current wave, so a primitive skips it and yields its next choice (a tie between
neighbours never wastes an expander's preferred relationship). Notes found in a wave join at its end.
Selection takes result order and stops at the first note that does not fit, so a smaller tokenLimit
is a prefix.

The result holds at most 2^max_depth notes, so a nearest-sibling pick lies at most 2^5 - 1 = 31
positions from the note that made it: an edit changes the picks of siblings up to 31 places away,
which is the sibling radius the strategy declares.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Final

from graphrag.core.params import Request
from graphrag.core.strategy import Strategy
from graphrag.tree.labels import label_of_path
from graphrag.tree.model import Need, Relation
from graphrag.tree.outcome import (
    Costing,
    Focus,
    Outcome,
    outcome_by_labels,
    prepare_focus,
    within_budget,
)

__all__ = [
    "PRIMITIVES", "STRATEGY", "BfsParams", "ordered_relationships", "relationship_bfs", "translate",
]

PRIMITIVES: Final = ("parent", "target", "sibling", "target-sibling", "child", "inbound-ref")
_SYMBOLS: Final = {
    "parent": "P",
    "target": "O",
    "sibling": "PC",
    "target-sibling": "OI",
    "child": "C",
    "inbound-ref": "I",
}
_CANCELS: Final = {("C", "P"), ("I", "O")}  # each pair steps back to the note it left


#: Relationship weights by the last step of a note's path ("start": the focus; "other": any last
#: step without its own row); a relationship not listed weighs 0.
_WEIGHTS: Final = (
    ("start", "parent", 2), ("start", "target", 2), ("start", "sibling", 1),
    ("start", "target-sibling", 1), ("start", "child", 1),
    ("child", "sibling", 3), ("child", "target-sibling", 1),
    ("inbound-ref", "target-sibling", 3),
    ("other", "parent", 1), ("other", "target", 1),
)


@dataclass(frozen=True, slots=True)
class BfsParams:
    """docs/algorithms.md (relationship-BFS): waves and the relationship weights."""

    max_depth: int = 5
    weights: tuple[tuple[str, str, int], ...] = _WEIGHTS


def _weights(table: Sequence[tuple[str, str, int]], last: str | None) -> dict[str, int]:
    row = "start" if last is None else last if last in ("child", "inbound-ref") else "other"
    return {rel: weight for step, rel, weight in table if step == row}


def ordered_relationships(
    path: Sequence[str], table: Sequence[tuple[str, str, int]] = _WEIGHTS
) -> tuple[str, ...]:
    """A note's relationships: no child after parent; weight descending, then the base order."""
    last = path[-1] if path else None
    weights = _weights(table, last)
    allowed = [p for p in PRIMITIVES if not (p == "child" and last == "parent")]
    return tuple(sorted(allowed, key=lambda p: (-weights.get(p, 0), PRIMITIVES.index(p))))


def translate(path: Sequence[str]) -> str:
    """A primitive path in the P/C/O/I alphabet with every ``CP`` and ``IO`` cancelled."""
    out: list[str] = []
    for symbol in "".join(_SYMBOLS[step] for step in path):
        if out and (out[-1], symbol) in _CANCELS:
            out.pop()
        else:
            out.append(symbol)
    return "".join(out)


def relationship_bfs(
    costing: Costing, params: BfsParams, request: Request
) -> Generator[Need, None, Outcome]:
    """Compute one focus note's context; yields what it needs loaded, returns the outcome."""
    focus = yield from prepare_focus(costing.view, costing.counter, request.focus_id)
    run = _Run(costing, focus, params.weights)
    for _ in range(params.max_depth):
        yield from costing.view.ensure(run.wave_need())
        if not run.expand():
            break
        yield from costing.view.ensure(Need(rows=frozenset(run.result)))
    return run.select(request.token_limit)


def _nearest(items: Sequence[int], at: int, taken: Callable[[int], bool]) -> int | None:
    """The item nearest index ``at`` that is not taken; ties go to the right (later) side."""
    for distance in range(1, len(items)):
        for index in (at + distance, at - distance):
            if 0 <= index < len(items) and not taken(items[index]):
                return items[index]
    return None


class _Run:
    def __init__(self, costing: Costing, focus: Focus, weights: Sequence[tuple[str, str, int]]) -> None:
        self.costing, self.view, self.focus, self.weights = costing, costing.view, focus, weights
        self.result: list[int] = [focus.skeleton.id]
        self.members: set[int] = set(self.result)
        self.path: dict[int, tuple[str, ...]] = {focus.skeleton.id: ()}
        self.last_used: dict[int, int] = {}

    def wave_need(self) -> Need:
        rows, children, inbound = set(), set(self.result), set(self.result)
        for note in self.result:
            sk = self.view.live(note)
            if sk is not None and sk.parent_id is not None:
                rows.add(sk.parent_id)
                children.add(sk.parent_id)
            if sk is not None and sk.target_id is not None:
                rows.add(sk.target_id)
                inbound.add(sk.target_id)
        return Need(rows=frozenset(rows), children=frozenset(children), inbound=frozenset(inbound))

    def expand(self) -> bool:
        """One wave; returns whether anything joined."""
        found: list[int] = []
        found_set: set[int] = set()

        def taken(note_id: int) -> bool:  # in the result, or found earlier in this wave
            return note_id in self.members or note_id in found_set

        for note in list(self.result):
            order = ordered_relationships(self.path[note], self.weights)
            start = self.last_used.get(note, -1) + 1
            for k in range(len(order)):
                at = (start + k) % len(order)
                neighbour = self._neighbour(note, order[at], taken)
                if neighbour is not None:
                    found.append(neighbour)
                    found_set.add(neighbour)
                    self.path[neighbour] = (*self.path[note], order[at])
                    self.last_used[note] = at
                    break
        self.result.extend(found)
        self.members.update(found)
        return bool(found)

    def _neighbour(self, note: int, relationship: str, taken: Callable[[int], bool]) -> int | None:
        v = self.view
        if relationship in ("parent", "target"):
            other = v.parent(note) if relationship == "parent" else v.target(note)
            return None if other is None or taken(other.id) else other.id
        if relationship == "sibling":
            parent = v.parent(note)
            items = v.children(parent.id) if parent is not None else ()
        elif relationship == "target-sibling":
            target = v.target(note)
            items = v.inbound(target.id) if target is not None else ()
        else:
            listed = v.children(note) if relationship == "child" else v.inbound(note)
            return next((i for i in listed if not taken(i)), None)
        return _nearest(items, items.index(note), taken) if note in items else None

    def _label(self, note: int) -> Relation:
        v, focus = self.view, self.focus.skeleton
        sk = v.live(note)
        parent, target = v.live(focus.parent_id), v.live(focus.target_id)
        after = sk is not None and sk.order_key > focus.order_key
        if parent is not None and note == parent.id:
            return Relation.PARENT
        if target is not None and note == target.id:
            return Relation.OBJECT
        if sk is not None and sk.parent_id == focus.id:
            return Relation.CHILD
        if sk is not None and sk.target_id == focus.id:
            return Relation.INBOUND_REFERENCE
        if sk is not None and parent is not None and sk.parent_id == parent.id:
            return Relation.YOUNGER_SIBLING if after else Relation.PRIOR_SIBLING
        path = translate(self.path[note])
        return label_of_path(path, after_focus=after) if path else Relation.REMOTELY_RELATED

    def select(self, token_limit: int) -> Outcome:
        picks = [p for n in self.result[1:] if (p := self.costing.pick(n, self._label(n)))]
        keep = within_budget((p.tokens for p in picks), token_limit - self.focus.tokens)
        return outcome_by_labels(self.focus, tuple(picks[:keep]), self.view)


STRATEGY = Strategy(
    name="relationship-bfs", version=2, model="tree", limits="prefix", params=BfsParams(),
    run=relationship_bfs, sibling_radius=31,
    description="deterministic waves where every result note expands one "
                "relationship per wave (the seed is ignored)",
)
