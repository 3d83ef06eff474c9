"""Properties of both strategies on random graphs (hypothesis).

Graphs have 5-60 notes with parents among earlier ids (or none), about 20% link notes, some deleted
notes, tied and negative sibling orders; the ``wild`` variant also adds parent cycles and dangling
parent/target ids (ids that do not exist).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphrag
from graphrag import CharsCounter, OnePerNoteCounter, Request, TokenCounter
from graphrag.tree.labels import WEIGHTS
from graphrag.tree.model import Relation
from tests.support import DAY_MS, NOW_MS, Graph, compute, compute_all, compute_preloaded

DETAILS = [None, "", "short", "é" * 100, "中" * 60, "x" * 300, "😀" * 40 + "tail"]
WAVEFRONT_IMPOSSIBLE = {
    # paths of four hops or more; MAX_DEPTH = 3 cannot produce them
    "SiblingOfParentOfObject",
    "ChildOfSiblingOfParent",
    "ChildOfSiblingOfParentOfObject",
}
LAYERED_NEVER = {"GrandChild", "RemotelyRelated", "Self"}


@dataclass
class Case:
    graph: Graph
    focus: int
    strategy: str
    counter: TokenCounter
    token_limit: int
    seed: int

    def run(self, **kw: Any) -> graphrag.Outcome:
        kw.setdefault("token_limit", self.token_limit)
        return compute(
            self.graph, self.focus, self.strategy, seed=self.seed, counter=self.counter, **kw
        )


@st.composite
def graphs(draw: st.DrawFn, *, wild: bool = False) -> Graph:
    n = draw(st.integers(5, 60))
    g = Graph()
    for i in range(1, n + 1):
        if wild and draw(st.integers(0, 9)) == 0:
            parent = draw(st.integers(1, n + 3))  # any id: cycles, self-loops, dangling ids
        elif i > 1 and draw(st.integers(0, 9)) < 8:
            parent = draw(st.integers(1, i - 1))
        else:
            parent = None
        target = None
        if draw(st.integers(0, 4)) == 0:  # ~20% link notes, half of them pointing at "hubs"
            hub = draw(st.booleans())
            target = draw(st.integers(1, min(n, 4) if hub else n + 3 if wild else n))
        g.add(
            i,
            parent_id=parent,
            target_id=target,
            sibling_order=draw(st.integers(-2, 3)),
            details=draw(st.sampled_from(DETAILS)),
            created_at_ms=NOW_MS - draw(st.integers(0, 2000)) * DAY_MS,
            deleted=draw(st.integers(0, 9)) == 0,
        )
    return g


@st.composite
def cases(draw: st.DrawFn, *, wild: bool = False) -> Case:
    g = draw(graphs(wild=wild))
    live = [i for i, n in g.notes.items() if not n.deleted]
    if not live:
        g.notes[1].deleted = False
        live = [1]
    focus = draw(st.sampled_from(live[:4]) | st.sampled_from(live))
    strategy = draw(st.sampled_from(["wavefront", "layered"]))
    if draw(st.booleans()):
        counter: TokenCounter = CharsCounter()
        limit = draw(st.integers(0, 4000))
    else:
        counter = OnePerNoteCounter()
        limit = draw(st.integers(0, 40))
    return Case(g, focus, strategy, counter, limit, draw(st.integers(0, 2**32)))


# -- the graph, read independently of graphrag ---------------------------------------------------------
class Truth:
    def __init__(self, g: Graph) -> None:
        self.notes = g.notes

    def live(self, i: int | None) -> bool:
        return i is not None and i in self.notes and not self.notes[i].deleted

    def parent(self, i: int | None) -> int | None:
        if not self.live(i):
            return None
        p = self.notes[i].parent_id  # type: ignore[index]
        return p if self.live(p) else None

    def target(self, i: int | None) -> int | None:
        if not self.live(i):
            return None
        t = self.notes[i].target_id  # type: ignore[index]
        return t if self.live(t) else None

    def children(self, i: int) -> list[int]:
        return [j for j in self.notes if self.live(j) and self.notes[j].parent_id == i]

    def inbound(self, i: int) -> list[int]:
        return [j for j in self.notes if self.live(j) and self.notes[j].target_id == i]

    def ancestors(self, i: int | None) -> list[int]:
        """Live ancestors, root first; stops at a deleted/unknown note or a cycle."""
        chain: list[int] = []
        if not self.live(i):
            return chain
        seen = {i}
        current = i
        while True:
            p = self.notes[current].parent_id  # type: ignore[index]
            if p is None or p in seen or not self.live(p):
                break
            chain.append(p)
            seen.add(p)
            current = p
        return chain[::-1]

    def key(self, i: int) -> tuple[int, int]:
        sk = self.notes[i].skeleton()
        return sk.order_key


def label_holds(t: Truth, f: int, x: int, label: str) -> bool:
    """Does ``x`` stand in relation ``label`` to the focus ``f`` in the graph?"""
    pf, tf = t.parent(f), t.target(f)
    if label == "Parent":
        return x == pf
    if label == "Object":
        return x == tf
    if label == "Child":
        return t.parent(x) == f
    if label == "InboundReference":
        return t.target(x) == f
    if label in ("PriorSibling", "YoungerSibling"):
        if pf is None or t.parent(x) != pf or x == f:
            return False
        return (t.key(x) < t.key(f)) == (label == "PriorSibling")
    if label == "SubjectOfInboundReference":
        return any(t.parent(link) == x for link in t.inbound(f))
    if label == "AncestorInContextualPath":
        return x in t.ancestors(f)
    if label == "AncestorInObjectContextualPath":
        return tf is not None and x in t.ancestors(tf)
    if label == "ObjectOfReifiedChild":
        return any(t.target(c) == x for c in t.children(f))
    if label == "GrandChild":
        return f in t.ancestors(x) and t.parent(x) != f
    if label == "SiblingOfParent":
        gp = t.parent(pf)
        return gp is not None and t.parent(x) == gp and x != pf
    if label == "ChildOfSiblingOfParent":
        gp = t.parent(pf)
        return gp is not None and t.parent(t.parent(x)) == gp
    if label == "SiblingOfParentOfObject":
        tgp = t.parent(t.parent(tf))
        return tgp is not None and t.parent(x) == tgp and x != t.parent(tf)
    if label == "ChildOfSiblingOfParentOfObject":
        tgp = t.parent(t.parent(tf))
        return tgp is not None and t.parent(t.parent(x)) == tgp
    if label == "InboundReferenceContextualPath":
        return any(x in t.ancestors(link) for link in t.inbound(f))
    if label == "SiblingOfSubjectOfInboundReference":
        subjects = {t.parent(link) for link in t.inbound(f)} - {None}
        return t.parent(x) in subjects
    if label == "InboundReferenceToObjectOfReifiedChild":
        objects = {t.target(c) for c in t.children(f)} - {None}
        return t.target(x) in objects
    return label == "RemotelyRelated"


# -- the properties ------------------------------------------------------------------------------------
def check(case: Case) -> None:
    out = case.run()
    raw = out.to_json()
    assert case.run().to_json() == raw, "same graph, seed and limit must give identical bytes"
    parsed = orjson.loads(raw)
    assert list(parsed) == ["focusNote", "relatedNotes"]
    related = parsed["relatedNotes"]
    focus_json = parsed["focusNote"]
    t, f = Truth(case.graph), case.focus

    # relatedNotes are exactly the picks, emitted with the bytes they were costed on
    assert [n["uri"] for n in related] == [f"/n{p.note_id}" for p in out.picks]
    assert [n["relationToFocusNote"] for n in related] == [p.relation.value for p in out.picks]
    for pick in out.picks:
        assert pick.json in raw
        assert pick.tokens == case.counter.count(pick.json)
    uris_seen = [n["uri"] for n in related]
    assert len(uris_seen) == len(set(uris_seen)), "no note twice in relatedNotes"

    # the budget holds (the focus is included in tokenLimit)
    if out.picks:
        assert out.focus.tokens + sum(p.tokens for p in out.picks) <= case.token_limit
    if case.token_limit <= out.focus.tokens:
        assert related == []

    # the focus note
    assert focus_json["uri"] == f"/n{f}"
    assert focus_json["relationToFocusNote"] == "Self"
    assert focus_json["contextualPath"] == [f"/n{a}" for a in t.ancestors(f)]
    if t.parent(f) not in (None, f):
        assert focus_json["contextualPath"][-1] == f"/n{t.parent(f)}"

    # labels agree with the graph; deleted notes never appear
    for pick in out.picks:
        x, label = pick.note_id, pick.relation.value
        assert t.live(x), f"deleted or unknown note {x} shown"
        assert label_holds(t, f, x, label), f"/n{x} is not {label} of /n{f}"

    chosen = {p.note_id: p.relation.value for p in out.picks}
    for key, label in (
        ("children", "Child"),
        ("priorSiblings", "PriorSibling"),
        ("youngerSiblings", "YoungerSibling"),
        ("inboundReferences", "InboundReference"),
    ):
        listed = [int(u[2:]) for u in focus_json[key]]
        assert len(listed) == len(set(listed))
        assert set(listed) <= set(chosen), f"{key} lists a note that was not selected"
        for x in listed:
            assert label_holds(t, f, x, label), f"{key} lists /n{x}"
        if key in ("priorSiblings", "youngerSiblings"):
            assert listed == sorted(listed, key=t.key)
        if case.strategy == "wavefront":
            in_order = [p.note_id for p in out.picks if p.relation.value == label]
            if key in ("priorSiblings", "youngerSiblings"):
                in_order.sort(key=t.key)
            assert listed == in_order

    labels = [p.relation.value for p in out.picks]
    if case.strategy == "wavefront":
        assert f not in chosen, "the wavefront never shows the focus as a related note"
        assert not set(labels) & WAVEFRONT_IMPOSSIBLE
        weights = [WEIGHTS[Relation(r)] for r in labels]
        assert weights == sorted(weights, reverse=True), "core, then structural, then remote"
        assert labels.count("Child") <= 6
        assert labels.count("InboundReference") <= 6
        assert len(out.picks) <= 200
    else:
        assert not set(labels) & LAYERED_NEVER


SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(cases())
def test_random_graphs(case: Case) -> None:
    check(case)


@SETTINGS
@given(cases(wild=True))
def test_random_graphs_with_cycles_and_dangling_ids(case: Case) -> None:
    check(case)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.integers(0, 4000))
def test_wavefront_smaller_limit_is_a_slice_of_the_larger(case: Case, other: int) -> None:
    small, large = sorted((case.token_limit, other))
    if isinstance(case.counter, OnePerNoteCounter):
        small, large = sorted((case.token_limit, other % 41))
    case.strategy = "wavefront"
    full = case.run(token_limit=large)
    expected = graphrag.slice_result(
        orjson.loads(full.to_json()), full.focus.tokens, full.related_tokens, small
    )
    live = case.run(token_limit=small, traversal_token_limit=large)
    assert orjson.loads(live.to_json()) == expected


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(wild=True))
def test_a_run_that_stops_on_missing_data_decides_as_one_on_a_loaded_graph(case: Case) -> None:
    """Lazily (every datum it lacks stops the run, which goes on once it is loaded) and on a view
    holding the whole graph before it starts: the same bytes."""
    request = Request(case.focus, case.seed, case.token_limit, NOW_MS)
    loaded = compute_preloaded(case.graph, request, case.strategy, counter=case.counter)
    assert isinstance(loaded, graphrag.Outcome) and loaded.to_json() == case.run().to_json()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(wild=True), st.data())
def test_a_batch_computes_the_same_bytes_as_single_runs(case: Case, data: st.DataObject) -> None:
    live = [i for i, n in case.graph.notes.items() if not n.deleted]
    foci = data.draw(st.lists(st.sampled_from(live), min_size=1, max_size=4, unique=True))
    requests = [Request(f, case.seed, case.token_limit, NOW_MS) for f in foci]
    _, results = compute_all(case.graph, requests, case.strategy, counter=case.counter)
    for request in requests:
        batched = results[request]
        assert isinstance(batched, graphrag.Outcome)
        single = compute(
            case.graph, request.focus_id, case.strategy, token_limit=case.token_limit,
            seed=case.seed, counter=case.counter,
        )
        assert batched.to_json() == single.to_json()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.integers(1, 5))
def test_a_disconnected_edit_changes_nothing(case: Case, extra: int) -> None:
    before = case.run().to_json()
    base = max(case.graph.notes) + 100
    for k in range(extra):  # a separate notebook, sharing nothing with the existing notes
        case.graph.add(base + k, parent_id=base if k else None, target_id=base if k % 2 else None)
    assert case.run().to_json() == before


def test_two_note_parent_cycle_terminates() -> None:
    g = Graph()
    g.add(1, parent_id=2)
    g.add(2, parent_id=1)
    for strategy in ("wavefront", "layered"):
        for focus in (1, 2):
            out = compute(g, focus, strategy)
            parsed = orjson.loads(out.to_json())
            other = 3 - focus
            assert parsed["focusNote"]["contextualPath"] == [f"/n{other}"]
            assert (other, "Parent") in [(p.note_id, p.relation.value) for p in out.picks]
            check(Case(g, focus, strategy, CharsCounter(), 5000, 0))


def test_self_parent_and_self_target_terminate() -> None:
    g = Graph()
    g.add(1, parent_id=1, target_id=1, title=":me")
    g.add(2, parent_id=1)
    for strategy in ("wavefront", "layered"):
        out = compute(g, 1, strategy)
        assert orjson.loads(out.to_json())["focusNote"]["contextualPath"] == []
        check(Case(g, 1, strategy, CharsCounter(), 5000, 0))


def test_dangling_parent_and_target_ids() -> None:
    g = Graph()
    g.add(1, parent_id=404, target_id=405, title=":to nowhere")
    g.add(2, parent_id=1, target_id=406, title=":also nowhere")
    g.add(3, parent_id=1)
    for strategy in ("wavefront", "layered"):
        for focus in (1, 2, 3):
            check(Case(g, focus, strategy, CharsCounter(), 5000, 1))
        focus_json = orjson.loads(compute(g, 1, strategy).to_json())["focusNote"]
        assert focus_json["contextualPath"] == []
        assert "subjectUriAndTitle" not in focus_json and "objectUriAndTitle" not in focus_json
