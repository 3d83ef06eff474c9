"""The relationship-BFS strategy (seed-003 with the decisions of DESIGN §2b).

Deterministic: the seed is accepted and ignored. In every wave each note already in the result, in
result order, expands once along the first fruitful relationship of its own ordered list, starting just
after the one it used last time (cyclically). Notes found in a wave join at its end. Selection takes
result order and stops at the first note that does not fit, so a smaller tokenLimit is a prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Final

from graphrag.labels import label_of_path
from graphrag.model import Need, Relation
from graphrag.outcome import Costing, Focus, Outcome, outcome_by_labels, prepare_focus, within_budget
from graphrag.params import BfsParams, Request

__all__ = ["PRIMITIVES", "ordered_relationships", "relationship_bfs", "translate"]

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


def _weights(last: str | None) -> dict[str, int]:
    if last is None:
        return {"parent": 2, "target": 2, "sibling": 1, "target-sibling": 1, "child": 1}
    if last == "child":
        return {"sibling": 3, "target-sibling": 1}
    if last == "inbound-ref":
        return {"target-sibling": 3}
    return {"parent": 1, "target": 1}


def ordered_relationships(path: Sequence[str]) -> tuple[str, ...]:
    """A note's relationships: no child after parent; weight descending, then the base order."""
    last = path[-1] if path else None
    weights = _weights(last)
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
    run = _Run(costing, focus)
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
    def __init__(self, costing: Costing, focus: Focus) -> None:
        self.costing, self.view, self.focus = costing, costing.view, focus
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
        for note in list(self.result):
            order = ordered_relationships(self.path[note])
            start = self.last_used.get(note, -1) + 1
            for k in range(len(order)):
                at = (start + k) % len(order)
                neighbour = self._neighbour(note, order[at])
                if neighbour is not None and neighbour not in found:
                    found.append(neighbour)
                    self.path[neighbour] = (*self.path[note], order[at])
                    self.last_used[note] = at
                    break
        self.result.extend(found)
        self.members.update(found)
        return bool(found)

    def _neighbour(self, note: int, relationship: str) -> int | None:
        v, taken = self.view, self.members.__contains__
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
