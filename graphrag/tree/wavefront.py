"""The wavefront strategy (docs/algorithms.md, "Wavefront").

Discovery runs in waves 1..max_depth over the primitive edges P, O (from last wave's notes) and C, I
(topped up from every earlier note under growing caps), into a pool capped at max_total_candidates and
sized for the maximum budget. Candidates are scored and selected stop-at-first-misfit, so every smaller
tokenLimit selects a prefix of the same ranking.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from graphrag.core.params import Request
from graphrag.core.strategy import Strategy
from graphrag.tree.labels import WEIGHTS, label_of_path, priority
from graphrag.tree.model import Need, Relation
from graphrag.tree.outcome import (
    Costing,
    Focus,
    Outcome,
    Pick,
    outcome_by_labels,
    prepare_focus,
    within_budget,
)
from graphrag.tree.rand import u

__all__ = ["STRATEGY", "WavefrontParams", "wavefront"]

_MS_PER_DAY = 86_400_000


@dataclass(frozen=True, slots=True)
class WavefrontParams:
    """The wavefront's knobs (docs/algorithms.md, "Wavefront"): every constant
    that shapes a result, so the fingerprint covers them all."""

    max_depth: int = 3
    max_total_candidates: int = 200
    child_cap_multiplier: int = 2
    inbound_cap_multiplier: int = 2
    w_relationship: float = 100.0
    w_depth: float = 20.0
    w_recency: float = 5.0
    jitter_range: float = 0.5
    safety_margin: float = 1.2
    #: depth bonus of a note found in wave 1, 2, 3, ...; 0 beyond the last entry
    depth_bonus: tuple[float, ...] = (1.0, 0.7, 0.4)
    #: recency is exp(-age_days / recency_days)
    recency_days: float = 365.0
    #: relationship weight per relationToFocusNote value
    relation_weights: tuple[tuple[str, float], ...] = tuple(
        (label.value, weight) for label, weight in WEIGHTS.items()
    )


def wavefront(
    costing: Costing, params: WavefrontParams, request: Request
) -> Generator[Need, None, Outcome]:
    """Compute one focus note's context; yields what it needs loaded, returns the outcome."""
    focus = yield from prepare_focus(costing.view, costing.counter, request.focus_id)
    run = _Run(costing, params, request, focus)
    yield from run.discover()
    return run.select()


class _Run:
    def __init__(self, costing: Costing, p: WavefrontParams, req: Request, focus: Focus) -> None:
        self.costing, self.view, self.p, self.req, self.focus = costing, costing.view, p, req, focus
        self.focus_id = focus.skeleton.id
        self.wave: dict[int, int] = {self.focus_id: 0}
        self.path: dict[int, str] = {self.focus_id: ""}
        self.order: list[int] = [self.focus_id]
        self.children_drawn: Counter[int] = Counter()
        self.inbound_drawn: Counter[int] = Counter()
        self.full = False
        self.weights = dict(p.relation_weights)

    # -- discovery --------------------------------------------------------------------------------
    def discover(self) -> Generator[Need, None, None]:
        max_budget = self.req.sizing_limit - self.focus.tokens
        for depth in range(1, self.p.max_depth + 1):
            sources = [n for n in self.order if self.wave[n] < depth]
            frontier = [n for n in sources if self.wave[n] == depth - 1]
            yield from self.view.ensure(self._wave_need(sources, frontier))
            self._expand(depth, sources, set(frontier))
            yield from self.view.ensure(Need(rows=frozenset(self.order)))
            if self.full or self._estimate() > self.p.safety_margin * max_budget:
                return

    def _wave_need(self, sources: list[int], frontier: list[int]) -> Need:
        ups: set[int] = set()
        for note_id in frontier:
            sk = self.view.live(note_id)
            if sk is not None:
                ups.update(x for x in (sk.parent_id, sk.target_id) if x is not None)
        return Need(rows=frozenset(ups), children=frozenset(sources), inbound=frozenset(sources))

    def _expand(self, depth: int, sources: list[int], frontier: set[int]) -> None:
        for source in sources:
            if source in frontier:
                sk = self.view.live(source)
                if sk is not None:
                    self._reach(sk.parent_id, source, "P", depth)
                    self._reach(sk.target_id, source, "O", depth)
            self._draw_children(source, depth)
            self._draw_inbound(source, depth)
            if self.full:
                return

    def _label(self, note_id: int, path: str) -> Relation:
        if path != "PC":
            return label_of_path(path)
        sk, focus = self.view.live(note_id), self.focus.skeleton
        return label_of_path(path, after_focus=sk is not None and sk.order_key > focus.order_key)

    def _add(self, note_id: int, depth: int, path: str) -> bool:
        if len(self.order) - 1 >= self.p.max_total_candidates:
            self.full = True
            return False
        self.wave[note_id], self.path[note_id] = depth, path
        self.order.append(note_id)
        return True

    def _reach(self, note_id: int | None, source: int, edge: str, depth: int) -> None:
        """A P or O edge: add the note, or give a pooled note a shorter/higher-priority path."""
        if note_id is None or self.view.live(note_id) is None:
            return
        path = self.path[source] + edge
        if note_id not in self.wave:
            self._add(note_id, depth, path)
            return
        old = self.path[note_id]
        if len(path) < len(old) or (
            len(path) == len(old)
            and priority(self._label(note_id, path)) < priority(self._label(note_id, old))
        ):
            self.path[note_id] = path

    def _draw_children(self, parent: int, depth: int) -> None:
        cap = self.p.child_cap_multiplier * (depth - self.wave[parent])
        room = cap - self.children_drawn[parent]
        kids = self.view.children(parent)
        if room <= 0 or not kids:
            return
        picked = self._pooled_positions(parent, kids)
        if picked:
            chosen = self._nearest_children(kids, picked, room)
        else:
            size = min(room, len(kids))
            start = math.floor(u(self.req.int_seed, "block", parent) * (len(kids) - size + 1))
            chosen = list(kids[start : start + size])
        for kid in chosen:
            if not self._add(kid, depth, self.path[parent] + "C"):
                return
            self.children_drawn[parent] += 1

    def _pooled_positions(self, parent: int, kids: Sequence[int]) -> list[int]:
        """Ascending indexes in ``kids`` of pooled notes; a monster parent is not scanned."""
        if len(kids) <= len(self.wave):
            return [i for i, kid in enumerate(kids) if kid in self.wave]
        at = self.costing.child_positions(parent)
        return sorted(at[n] for n in self.wave if n in at)

    def _nearest_children(self, kids: Sequence[int], picked: list[int], room: int) -> list[int]:
        """Up to ``room`` unpooled children nearest to a picked index (ties by ``u``), found level
        by level outwards so a monster parent costs its distance levels, not all its children."""
        chosen: list[int] = []
        seen = set(picked)
        for distance in range(1, len(kids)):
            level = {
                i
                for p in picked
                for i in (p - distance, p + distance)
                if 0 <= i < len(kids) and i not in seen
            }
            seen |= level
            free = [kids[i] for i in level if kids[i] not in self.wave]
            free.sort(key=lambda k: u(self.req.int_seed, "near", k))
            chosen += free[: room - len(chosen)]
            if len(chosen) >= room:
                break
        return chosen

    def _draw_inbound(self, target: int, depth: int) -> None:
        cap = self.p.inbound_cap_multiplier * (depth - self.wave[target])
        room = cap - self.inbound_drawn[target]
        refs = self.view.inbound(target)
        if room <= 0 or not refs:
            return
        ranked = self.costing.shuffled(self.req.int_seed, "inbound", target, refs)
        for ref in [r for r in ranked if r not in self.wave][:room]:
            if not self._add(ref, depth, self.path[target] + "I"):
                return
            self.inbound_drawn[target] += 1

    def _estimate(self) -> int:
        picks = (self.costing.pick(n, self._label(n, self.path[n])) for n in self.order[1:])
        return sum(p.tokens for p in picks if p is not None)

    # -- scoring and selection --------------------------------------------------------------------
    def _score(self, note_id: int, label: Relation) -> float:
        row = self.view.row(note_id)
        age_days = max(0, self.req.now_ms - row.created_at_ms) / _MS_PER_DAY if row else 0.0
        jitter = (u(self.req.int_seed, "jitter", note_id) - 0.5) * 2 * self.p.jitter_range
        wave, bonus = self.wave[note_id], self.p.depth_bonus
        return (
            self.p.w_relationship * self.weights[label.value]
            + self.p.w_depth * (bonus[wave - 1] if 0 < wave <= len(bonus) else 0.0)
            + self.p.w_recency * math.exp(-age_days / self.p.recency_days)
            + jitter
        )

    def select(self) -> Outcome:
        ranked: list[tuple[float, int, Pick]] = []
        for note_id in self.order[1:]:
            label = self._label(note_id, self.path[note_id])
            pick = self.costing.pick(note_id, label)
            if pick is not None:
                ranked.append((-self._score(note_id, label), note_id, pick))
        ranked.sort(key=lambda item: (item[0], item[1]))
        picks = [pick for _, _, pick in ranked]
        keep = within_budget((p.tokens for p in picks), self.req.token_limit - self.focus.tokens)
        return outcome_by_labels(self.focus, tuple(picks[:keep]), self.view)


STRATEGY = Strategy(
    name="wavefront", version=1, model="tree", limits="prefix", params=WavefrontParams(),
    run=wavefront, sibling_radius=4,
    description="waves over parent, child, target and inbound edges, scored and cut "
                "at the first misfit (the default on the note tree)",
)
