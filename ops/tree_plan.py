"""Phase 1 of a generated Doughnut-2025 ``note`` table: the forest's structure (see
:mod:`ops.generate` for the shape it imitates and phase 2, the rows).

:class:`Forest` decides, for every id, the note's kind (notebook head, plain note, link note, child
of a monster parent), its parent, a link's target, its notebook and its deletion stamp; the rows'
titles, details, times and orders are phase 2's. Parents and link targets always have lower ids
than the notes under or pointing at them, so rows can be inserted in id order. A deletion stamp
covers whole subtrees plus the link notes pointing into them and is drawn after the creation of the
highest id it covers, so no note is deleted before it exists. Deterministic per ``random.Random``:
every choice is drawn in a fixed order from the one generator the caller passes (phase 2 goes on
drawing from it), so a seed gives the same forest on every machine.
"""

from __future__ import annotations

import calendar
import datetime as dt
import random
from array import array
from collections.abc import Sequence

__all__ = ["SPAN_S", "START", "START_EPOCH_S", "Forest", "base_s"]

END = dt.datetime(2026, 6, 30)
START = END - dt.timedelta(days=5 * 365 + 1)
SPAN_S = int((END - START).total_seconds())
START_EPOCH_S = calendar.timegm(START.timetuple())
_END_MS = calendar.timegm(END.timetuple()) * 1000

_PLAIN, _HEAD, _LINK, _MONSTER_CHILD = 0, 1, 2, 3


def _scaled(n: int, at_100k: int, slope: float) -> int:
    """``at_100k`` at 100k notes, proportional below, growing by ``slope`` per note above."""
    if n <= 100_000:
        return at_100k * n // 100_000
    return int(at_100k + (n - 100_000) * slope)


def _monster_sizes(n: int) -> list[int]:
    base = _scaled(n, 5_200, 0.005)
    sizes = [base, base * 13 // 10] + ([base * 16 // 10] if n >= 500_000 else [])
    return [s for s in sizes if s > 0]


def _hub_sizes(n: int) -> list[int]:
    base = _scaled(n, 1_150, 0.0012)
    sizes = [base, base * 5 // 4, base * 3 // 2] + ([base * 2] if n >= 500_000 else [])
    return [s for s in sizes if s > 0]


def _capacity(rng: random.Random) -> int:
    """Planned number of children: 40% leaves, the rest Pareto-distributed (power law)."""
    if rng.random() < 0.4:
        return 0
    return min(int(rng.paretovariate(1.2)), 400)


def _assign(rng: random.Random, owners: Sequence[int], sizes: Sequence[int],
            candidates: list[int]) -> dict[int, int]:
    """Map ``sum(sizes)`` members drawn from ``candidates`` to their owners, ``sizes[k]`` each."""
    labels = [o for o, s in zip(owners, sizes, strict=False) for _ in range(s)]
    members = rng.sample(candidates, min(len(labels), len(candidates)))
    rng.shuffle(labels)
    return dict(zip(members, labels, strict=False))


class Forest:
    """The structure of ``n`` notes: kinds, parents, targets, notebooks and deletion stamps."""

    def __init__(self, n: int, rng: random.Random) -> None:
        self.n, self.rng = n, rng
        self.kinds = bytearray(n + 1)
        self.parent = array("i", [0]) * (n + 1)
        self.target = array("i", [0]) * (n + 1)
        self.notebook = array("i", [0]) * (n + 1)
        self.deleted_ms = array("q", [0]) * (n + 1)
        self.monster_of: dict[int, int] = {}
        self.hub_of: dict[int, int] = {}
        self.special: set[int] = set()
        self.nodes = array("i")  # non-link notes so far: subjects and targets of links
        self.slots: list[int] = []  # the current notebook's free child slots, one entry per slot
        self.head = self.notebooks = 0

    def build(self) -> Forest:
        self._plan_kinds()
        for i in range(1, self.n + 1):
            self._grow(i)
        self._delete()
        return self

    # -- planning -----------------------------------------------------------------------------
    def _plan_kinds(self) -> None:
        n, rng = self.n, self.rng
        heads = [1, *rng.sample(range(2, n + 1), min(n - 1, max(0, round(n / 2000) - 1)))]
        for h in heads:
            self.kinds[h] = _HEAD
        monsters, hubs = self._pick_specials(len(_monster_sizes(n)), len(_hub_sizes(n)))
        self._plan_monster_children(monsters)
        share = n / max(1, n - sum(_monster_sizes(n)))
        for i in range(3, n + 1):
            if self.kinds[i] == _PLAIN and i not in self.special and rng.random() < 0.2 * share:
                self.kinds[i] = _LINK
        self._plan_hub_referrers(hubs)

    def _pick_specials(self, n_monsters: int, n_hubs: int) -> tuple[list[int], list[int]]:
        early = [i for i in range(2, min(self.n, max(3, self.n // 40)) + 1) if self.kinds[i] == _PLAIN]
        picked = self.rng.sample(early, min(len(early), n_monsters + n_hubs))
        self.special.update(picked)
        return picked[:n_monsters], picked[n_monsters:]

    def _plan_monster_children(self, monsters: list[int]) -> None:
        if not monsters:
            return
        after = max(monsters) + 1
        candidates = [i for i in range(after, self.n + 1) if self.kinds[i] == _PLAIN]
        self.monster_of = _assign(self.rng, monsters, _monster_sizes(self.n), candidates)
        for i in self.monster_of:
            self.kinds[i] = _MONSTER_CHILD

    def _plan_hub_referrers(self, hubs: list[int]) -> None:
        if not hubs:
            return
        after = max(hubs) + 1
        links = [i for i in range(after, self.n + 1) if self.kinds[i] == _LINK]
        self.hub_of = _assign(self.rng, hubs, _hub_sizes(self.n), links)

    # -- growing, in id order -----------------------------------------------------------------
    def _grow(self, i: int) -> None:
        kind = self.kinds[i]
        if kind == _LINK:
            self._link(i)
            return
        if kind == _HEAD:
            self.head, self.slots, self.notebooks = i, [], self.notebooks + 1
            self.notebook[i] = self.notebooks
        elif kind == _MONSTER_CHILD:
            self._attach(i, self.monster_of[i])
        elif self.rng.random() < 0.03:  # an addition to an older note, maybe in another notebook
            self._attach(i, self.nodes[self.rng.randrange(len(self.nodes))])
        else:
            self._attach(i, self._take_slot())
        self.nodes.append(i)
        if self.notebook[i] == self.notebooks:  # slots only for the current notebook
            self.slots.extend([i] * ((5 if kind == _HEAD else 0) + _capacity(self.rng)))

    def _take_slot(self) -> int:
        """A free child slot of the current notebook (so fan-out follows capacity), else its head."""
        rng, slots = self.rng, self.slots
        if not slots:
            return self.head
        j = rng.randrange(len(slots))
        chosen, slots[j] = slots[j], slots[-1]
        slots.pop()
        return chosen

    def _attach(self, i: int, parent: int) -> None:
        self.parent[i] = parent
        self.notebook[i] = self.notebook[parent]

    def _link(self, i: int) -> None:
        subject, target = self._recent_or_any(300, 0.7), self.hub_of.get(i)
        if target is None:
            target = self._recent_or_any(2000, 0.55)
            if self.rng.random() < 0.05:
                target = self.rng.randrange(1, i)  # any earlier note, link notes included
        while subject == target:  # links start at id 3, so another non-link note exists
            subject = self.nodes[self.rng.randrange(len(self.nodes))]
        self._attach(i, subject)
        self.target[i] = target

    def _recent_or_any(self, window: int, recent: float) -> int:
        rng, nodes = self.rng, self.nodes
        if rng.random() < recent:
            return nodes[len(nodes) - 1 - rng.randrange(min(window, len(nodes)))]
        return nodes[rng.randrange(len(nodes))]

    # -- soft deletion ------------------------------------------------------------------------
    def _reach(self) -> tuple[array[int], array[int]]:
        """Per note: how many notes deleting it would stamp (capped), and the highest id among them."""
        cost, last = array("i", [1]) * (self.n + 1), array("i", range(self.n + 1))
        for i in range(self.n, 0, -1):
            for up in (self.parent[i], self.target[i]):
                if up:
                    cost[up] = min(cost[up] + cost[i], 1 << 30)
                    last[up] = max(last[up], last[i])
        return cost, last

    def _delete(self) -> None:
        roots = self._deletion_roots()
        parent, target, stamp = self.parent, self.target, self.deleted_ms
        for i in range(1, self.n + 1):
            if stamp[parent[i]]:
                stamp[i] = stamp[parent[i]]
            elif i in roots:
                stamp[i] = roots[i]
            elif stamp[target[i]]:
                stamp[i] = stamp[target[i]]

    def _deletion_roots(self) -> dict[int, int]:
        n, rng = self.n, self.rng
        if n < 2:
            return {}
        cost, last = self._reach()
        goal, cap, covered = n // 50, max(12, n // 400), 0
        roots: dict[int, int] = {}
        for _ in range(100 + 20 * goal):
            if covered >= goal:
                break
            i = rng.randrange(2, n + 1)
            if self.kinds[i] == _HEAD or i in self.special or cost[i] > cap:
                continue
            if cost[i] == 1 and rng.random() < 0.7:
                continue  # prefer real subtrees to single leaves
            roots[i], covered = self._stamp_after(last[i]), covered + cost[i]
        return roots

    def _stamp_after(self, last_id: int) -> int:
        """A deletion time (epoch ms) later than the creation of note ``last_id``."""
        seconds = base_s(last_id + 1, self.n) + self.rng.randrange(60, 60 * 86_400)
        return min((START_EPOCH_S + seconds) * 1000 + self.rng.randrange(1000), _END_MS)


def base_s(i: int, n: int) -> int:
    """Seconds after START at which note ``i`` of ``n`` is created, before its jitter."""
    return (i - 1) * SPAN_S // n

