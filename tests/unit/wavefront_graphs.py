"""What several wavefront scenario modules share: ``wf``, a compute with an unlimited budget unless a
test names one, the relation of each related note, and the bigger graphs (a monster parent with
hundreds of children, a dense tree-like neighbourhood, a small family of notes with bodies)."""

from __future__ import annotations

import itertools

import graphrag
from tests.support import Graph, compute
from tests.unit.helpers import rels

BIG = 1_000_000


def wf(g: Graph, focus: int, **kw: object) -> graphrag.Outcome:
    kw.setdefault("token_limit", BIG)
    return compute(g, focus, "wavefront", **kw)  # type: ignore[arg-type]


def relation_of(outcome: graphrag.Outcome) -> dict[int, str]:
    return dict(rels(outcome))


def monster(n: int = 500) -> Graph:
    g = Graph()
    g.add(1, title="monster")
    for i in range(n):
        g.add(1000 + i, parent_id=1, sibling_order=i)
    return g


def dense(fan: int = 6, radius: int = 3) -> Graph:
    """Around note 1, a tree-like neighbourhood: every note gets a fresh parent, a fresh target,
    ``fan`` fresh children and ``fan`` fresh inbound link notes, out to ``radius`` hops."""
    g = Graph()
    fresh = itertools.count(1)
    frontier = [next(fresh)]
    g.add(frontier[0], title="centre")
    for _ in range(radius):
        grown = []
        for n in frontier:
            note = g.notes[n]
            if note.parent_id is None:
                note.parent_id = next(fresh)
                g.add(note.parent_id)
                grown.append(note.parent_id)
            if note.target_id is None:
                note.target_id = next(fresh)
                g.add(note.target_id)
                grown.append(note.target_id)
            for _ in range(fan):
                grown.append(g.add(next(fresh), parent_id=n).id)
            for _ in range(fan):
                grown.append(g.add(next(fresh), target_id=n).id)
        frontier = grown
    return g


def family() -> Graph:
    g = Graph()
    g.add(1, title="root", details="r" * 100)
    g.add(2, parent_id=1, title="parent", details="p" * 100)
    for sib in (3, 4, 6, 7):
        g.add(sib, parent_id=2, details="s" * 50)
    g.add(5, parent_id=2, title="focus", details="the focus")
    for kid in (10, 11, 12):
        g.add(kid, parent_id=5, details="k" * 30)
    g.add(13, parent_id=10)
    g.add(20, title="subject")
    g.add(21, parent_id=20, target_id=5, title=":mentions")
    g.add(22, parent_id=20, target_id=5, title=":cites")
    return g
