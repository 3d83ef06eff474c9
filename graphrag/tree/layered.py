"""The layered strategy: Doughnut's production algorithm as docs/doughnut.md describes it.

Four priority layers of relationship handlers; a handler yields one note per call and registers its
follow-up handlers in lower layers when it yields. A related note that does not fit is skipped and the
walk carries on, so a smaller tokenLimit is not a prefix of a larger one.

Data is read through the view. One step (a handler yields a note, registers its follow-ups and offers
it to the budget) changes the run's state only once everything it read was loaded; when something is
not loaded yet, the step is undone (the handler's position, the follow-ups it registered), the driver
loads what it lacked plus a look-ahead for every registered handler (so rounds stay few), and the
same step runs again. So the run goes on where it stopped, and its decisions are the ones a run on a
fully loaded graph makes.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

from graphrag.core.params import Request
from graphrag.core.strategy import Strategy
from graphrag.tree.model import Need, Relation
from graphrag.tree.model import Relation as R
from graphrag.tree.outcome import Costing, Focus, Outcome, Pick, in_sibling_order, prepare_focus
from graphrag.tree.view import MissingData

__all__ = ["STRATEGY", "LayeredParams", "layered"]


@dataclass(frozen=True, slots=True)
class LayeredParams:
    """Doughnut 2025 (docs/doughnut.md): notes accepted from a layer before switching to the next."""

    notes_before_switching: tuple[int, int, int, int] = (3, 3, 2, 2)

# Rows prefetched per registered handler on a restart. A handler's window doubles each time the run
# stops on it, so rounds stay logarithmic in the notes a large budget shows, while handlers that are
# barely used (a monster parent's other lists) read only a few rows.
_LOOKAHEAD_FIRST, _LOOKAHEAD_MAX = 8, 4096
_LISTS = {R.CHILD: 0, R.PRIOR_SIBLING: 1, R.YOUNGER_SIBLING: 2, R.INBOUND_REFERENCE: 3}


def layered(costing: Costing, params: LayeredParams, request: Request) -> Generator[Need, None, Outcome]:
    """Compute one focus note's context the way Doughnut does; yields needs, returns the outcome."""
    view = costing.view
    focus = yield from prepare_focus(view, costing.counter, request.focus_id)
    sk = focus.skeleton
    first = {request.focus_id, *focus.contextual_path[-2:]}
    targets = frozenset({sk.target_id} if sk.target_id is not None else set())
    yield from view.ensure(
        Need(children=frozenset(first), inbound=frozenset({sk.id}), ancestors=targets, rows=targets)
    )
    run = _Run(costing, params, request, focus)
    try:
        return (yield from run.run())
    finally:
        run.close()


class _Handler:
    """Yields the notes of one relationship, one per call, from a lazily computed list."""

    def __init__(self, relation: Relation, items: Callable[[], Sequence[int]], owner: int = 0) -> None:
        self.relation = relation
        self.key = (relation, owner)
        self._items = items
        self._cached: Sequence[int] | None = None
        self.position = 0

    def items(self) -> Sequence[int]:
        if self._cached is None:
            self._cached = self._items()
        return self._cached

    @property
    def exhausted(self) -> bool:
        """Whether every item has been yielded (only ever asked of a handler that was asked)."""
        return self._cached is not None and self.position >= len(self._cached)

    def next(self) -> int | None:
        items = self.items()
        if self.position >= len(items):
            return None
        self.position += 1
        return items[self.position - 1]


def _spiral(siblings: Sequence[int], center: int) -> list[int]:
    """Siblings around ``center``: left 1, right 1, left 2, right 2, ...; one side runs on alone."""
    if center not in siblings:
        return []
    at = siblings.index(center)
    left, right = list(siblings[:at][::-1]), list(siblings[at + 1 :])
    pairs = min(len(left), len(right))
    out = [0] * (2 * pairs)
    out[0::2], out[1::2] = left[:pairs], right[:pairs]  # slices, not a loop: a monster parent's
    return out + left[pairs:] + right[pairs:]  # thousands of children are spiralled per request


class _Run:
    def __init__(self, costing: Costing, p: LayeredParams, req: Request, focus: Focus) -> None:
        self.costing, self.view, self.req, self.focus = costing, costing.view, req, focus
        self.quota = p.notes_before_switching
        self.layers: list[list[_Handler]] = [[], [], [], []]
        self.counter = [0, 0, 0, 0]
        self.accepted: dict[int, Pick] = {}
        self.lists: tuple[list[int], ...] = ([], [], [], [])
        self.used = 0
        self.budget = req.token_limit - focus.tokens
        # rows prefetched per handler when the run stops on it (doubling each time)
        self.windows: dict[tuple[Relation, int], int] = {}
        self._register_initial()

    def close(self) -> None:
        """Drop the handlers. Their item lists are closures over this run, a reference cycle per
        run: left to the cycle collector, a batch's dead runs outlived the young generations and
        were reclaimed only by full collections (a third of layered's time, when runs restarted)."""
        self.layers = [[], [], [], []]

    # -- handler lists ----------------------------------------------------------------------------
    def _shuffled(self, relation: Relation, owner: int, ids: Sequence[int]) -> tuple[int, ...]:
        return self.costing.shuffled(self.req.int_seed, f"layered:{relation.value}", owner, ids)

    def _one(self, note_id: int | None) -> list[int]:
        return [] if note_id is None or self.view.live(note_id) is None else [note_id]

    def _siblings(self, note_id: int) -> Sequence[int]:
        parent = self.view.parent(note_id)
        return () if parent is None else self.view.children(parent.id)

    def _register_initial(self) -> None:
        v, focus = self.view, self.focus.skeleton
        parent, target = v.live(focus.parent_id), v.live(focus.target_id)

        def around(note: int | None) -> Callable[[], Sequence[int]]:
            return lambda: [] if note is None else _spiral(self._siblings(note), note)

        def prior() -> Sequence[int]:
            sibs = self._siblings(focus.id)
            return list(reversed(sibs[: sibs.index(focus.id)])) if focus.id in sibs else []

        def younger() -> Sequence[int]:
            sibs = self._siblings(focus.id)
            return list(sibs[sibs.index(focus.id) + 1 :]) if focus.id in sibs else []

        tid = target.id if target else None
        self.layers[0] += [
            _Handler(R.PARENT, lambda: self._one(focus.parent_id)),
            _Handler(R.OBJECT, lambda: self._one(focus.target_id)),
            _Handler(R.ANCESTOR_IN_CONTEXTUAL_PATH, lambda: v.ancestors(focus.id)),
        ]
        self.layers[1] += [
            _Handler(R.CHILD, lambda: v.children(focus.id)),
            _Handler(R.PRIOR_SIBLING, prior),
            _Handler(R.YOUNGER_SIBLING, younger),
            _Handler(
                R.INBOUND_REFERENCE,
                lambda: self._shuffled(R.INBOUND_REFERENCE, focus.id, v.inbound(focus.id)),
            ),
            _Handler(
                R.ANCESTOR_IN_OBJECT_CONTEXTUAL_PATH,
                lambda: [] if tid is None else v.ancestors(tid),
            ),
            _Handler(R.SIBLING_OF_PARENT, around(parent.id if parent else None)),
            _Handler(
                R.SIBLING_OF_PARENT_OF_OBJECT,
                around(p.id if tid is not None and (p := v.parent(tid)) else None),
            ),
        ]

    def _follow_ups(self, relation: Relation, note: int) -> None:
        v = self.view
        add3, add4 = self.layers[2].append, self.layers[3].append
        if relation is R.CHILD:
            sk = v.live(note)
            if sk is not None and sk.target_id is not None:
                add3(_Handler(R.OBJECT_OF_REIFIED_CHILD, lambda: self._one(sk.target_id), note))
        elif relation is R.INBOUND_REFERENCE:
            add3(
                _Handler(R.SUBJECT_OF_INBOUND_REFERENCE, lambda: self._one(self._parent_id(note)), note)
            )
            add4(self._random(R.INBOUND_REFERENCE_CONTEXTUAL_PATH, note, lambda: v.ancestors(note)))
        elif relation in (R.SIBLING_OF_PARENT, R.SIBLING_OF_PARENT_OF_OBJECT):
            cousin = (
                R.CHILD_OF_SIBLING_OF_PARENT
                if relation is R.SIBLING_OF_PARENT
                else R.CHILD_OF_SIBLING_OF_PARENT_OF_OBJECT
            )
            add4(self._random(cousin, note, lambda: v.children(note)))
        elif relation is R.OBJECT_OF_REIFIED_CHILD:
            add4(
                self._random(
                    R.INBOUND_REFERENCE_TO_OBJECT_OF_REIFIED_CHILD, note, lambda: v.inbound(note)
                )
            )
        elif relation is R.SUBJECT_OF_INBOUND_REFERENCE:
            add4(self._random(R.SIBLING_OF_SUBJECT_OF_INBOUND_REFERENCE, note, lambda: v.children(note)))

    def _parent_id(self, note: int) -> int | None:
        parent = self.view.parent(note)
        return None if parent is None else parent.id

    def _random(self, relation: Relation, owner: int, ids: Callable[[], Sequence[int]]) -> _Handler:
        return _Handler(relation, lambda: self._shuffled(relation, owner, ids()), owner)

    # -- the loop ---------------------------------------------------------------------------------
    def run(self) -> Generator[Need, None, Outcome]:
        yield from self._run_layer(0)
        while True:
            try:
                return self._outcome()
            except MissingData as miss:
                yield self.view.missing(miss.need)

    def _run_layer(self, layer: int) -> Generator[Need, None, None]:
        while True:
            processed = yield from self._pass(layer)
            has_next = layer + 1 < len(self.layers)
            if has_next and (self.counter[layer] >= self.quota[layer] or processed == 0):
                yield from self._run_layer(layer + 1)
                self.counter[layer] = 0
            if processed == 0:
                return

    def _pass(self, layer: int) -> Generator[Need, None, int]:
        processed, exhausted = 0, False
        for handler in list(self.layers[layer]):
            accepted = yield from self._step(handler)
            if accepted is None:
                exhausted = True
                continue
            if accepted:
                processed += 1
                self.counter[layer] += 1
                if self.counter[layer] >= self.quota[layer]:
                    break
        if exhausted:  # an exhausted handler stays exhausted: later passes need not ask it again
            self.layers[layer] = [h for h in self.layers[layer] if not h.exhausted]
        return processed

    def _step(self, handler: _Handler) -> Generator[Need, None, bool | None]:
        """The handler's next note: None when it has none left, else whether it was processed.
        A step that stops on missing data is undone, and run again once the data is loaded."""
        while True:
            position, third, fourth = handler.position, len(self.layers[2]), len(self.layers[3])
            try:
                note = handler.next()
                if note is None:
                    return None
                self._follow_ups(handler.relation, note)
                return self._offer(note, handler.relation)
            except MissingData as miss:
                handler.position = position
                del self.layers[2][third:], self.layers[3][fourth:]
                yield self.view.missing(miss.need | self.lookahead())
                key = handler.key
                self.windows[key] = min(self.windows.get(key, _LOOKAHEAD_FIRST) * 2, _LOOKAHEAD_MAX)

    def _offer(self, note: int, relation: Relation) -> bool:
        """Processed when accepted by the budget or already in the result."""
        if note not in self.accepted:
            pick = self.costing.pick(note, relation)
            if pick is None or self.used + pick.tokens > self.budget:
                return False
            self.accepted[note] = pick
            self.used += pick.tokens
        slot = _LISTS.get(relation)
        if slot is not None and note not in self.lists[slot]:
            self.lists[slot].append(note)
        return True

    def _outcome(self) -> Outcome:
        children, prior, younger, inbound = self.lists
        return Outcome(
            self.focus,
            tuple(self.accepted.values()),
            children=tuple(children),
            prior_siblings=in_sibling_order(self.view, prior),
            younger_siblings=in_sibling_order(self.view, younger),
            inbound_references=tuple(inbound),
        )

    # -- look-ahead -------------------------------------------------------------------------------
    def lookahead(self) -> Need:
        """What every registered handler will read in its next window of notes; never raises."""
        need, rows = Need(), set[int]()
        for handler in (h for layer in self.layers for h in layer):
            window = self.windows.get(handler.key, _LOOKAHEAD_FIRST)
            try:
                rows.update(handler.items()[handler.position : handler.position + window])
            except MissingData as miss:
                need = need | miss.need
        return need | Need(rows=frozenset(rows))


STRATEGY = Strategy(
    name="layered", version=1, model="tree", limits="per-limit", params=LayeredParams(),
    run=layered, sibling_radius=4,
    description="Doughnut 2025's production algorithm: four priority layers; a misfit is "
                "skipped, so results are stored per configured tokenLimit",
)
