"""Properties of the focus-context strategy on random wiki graphs (hypothesis).

Graphs have 1-3 notebooks owned by two users or a circle (with subscriptions and bazaar entries),
nested folders, 2-30 notes (some deleted, a few without a notebook) with bodies from empty to far over
the focus cap (emoji included), and link rows to live, deleted and absent notes, duplicates included.
Titles are unique (``N<id>``), so every URI names one note.
"""

from __future__ import annotations

import copy
import re
import zlib
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphrag.core.batch import run_batch
from graphrag.core.errors import GraphRagError
from graphrag.wiki.focus.build import trace
from graphrag.wiki.focus.context import (
    FocusContextParams,
    FocusContextResult,
    FocusRequest,
    RelatedNoteOut,
    Trace,
    cut,
    cut_json,
    focus_context,
)
from graphrag.wiki.focus.render import render_markdown, result_json
from graphrag.wiki.model import Viewer, WikiNote
from graphrag.wiki.view import WikiView
from tests.wiki_reference import java_estimate, reference_result
from tests.wiki_support import WikiGraph, format_2, result_of, trace_of

H = "---\ntype: Note\n---\n"
CONTENTS = [
    None,
    "",
    "short",
    H + "body",
    "x" * 300,
    "é" * 500,
    "中" * 400,
    "😀" * 100 + "tail",
    "a😀" * 200,
    "z" * 2000,
    " \n ",
    "y" * 8000,
    'ctl\x1a\x00"q\\u001a',
]
SWEEP = (1, 2, 5, 6, 50, 99, 100, 101, 500, 1999, 2000, 2001)
VIEWERS = [None, Viewer(user_id=1), Viewer(user_id=2), Viewer(circle_id=1)]
URI = re.compile(r"^\[\[(?:NB\d+: )?N(\d+)\]\]$")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Case:
    graph: WikiGraph
    focus: int
    viewer: Viewer | None
    seed: int | None
    max_depth: int
    params: FocusContextParams
    limit: int

    def request(self, **kw: Any) -> dict[str, Any]:
        return {
            "viewer": self.viewer,
            "seed": self.seed,
            "max_depth": self.max_depth,
            "params": self.params,
            **kw,
        }

    def trace(self, limit: int | None = None, graph: WikiGraph | None = None) -> Trace:
        return trace_of(graph or self.graph, self.focus, limit or self.limit, **self.request())

    def live(self, budget: int) -> FocusContextResult:
        return result_of(self.graph, self.focus, budget, **self.request())

    def budgets(self) -> tuple[int, ...]:
        return (*SWEEP, self.limit)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    graph = WikiGraph()
    graph.circles[1] = draw(st.sampled_from([{1}, {1, 2}]))
    owners = [{"user": 1}, {"user": 2}, {"circle": 1}]
    notebooks = []
    for i in range(draw(st.integers(1, 3))):
        owner = draw(st.sampled_from(owners))
        notebooks.append(graph.notebook(f"NB{i + 1}" + draw(st.sampled_from(["", " "])), **owner))
    for book in notebooks:
        graph.subscriptions |= {(u, book) for u in (1, 2) if draw(st.integers(0, 3)) == 0}
        if draw(st.integers(0, 3)) == 0:
            graph.bazaar.add(book)
    for i in range(draw(st.integers(0, 4))):
        book = draw(st.sampled_from(notebooks))
        parents = [f for f, folder in graph.folders.items() if folder.notebook_id == book]
        graph.folder(book, f" F{i}", draw(st.sampled_from([None, *parents])))
    count = draw(st.integers(2, 30))
    for i in range(1, count + 1):
        nb: int | None = notebooks[0] if i == 1 else draw(st.sampled_from([*notebooks * 8, None]))
        folders = [f for f, folder in graph.folders.items() if folder.notebook_id == nb]
        folder = draw(st.sampled_from([None, *folders]))
        deleted = i != 1 and draw(st.integers(0, 6)) == 0
        graph.note(f"N{i}", nb, folder, draw(st.sampled_from(CONTENTS)), deleted=deleted)
    for i in range(1, count + 1):
        graph.link(i, *draw(st.lists(st.integers(1, count + 2), max_size=7)))
    live = [i for i, n in graph.notes.items() if not n.deleted and n.notebook_id is not None]
    focus = draw(st.sampled_from(live))
    viewer = draw(st.sampled_from(VIEWERS))
    if viewer is not None and not graph.access(viewer, graph.notes[focus].notebook_id or 0).readable:
        viewer = None
    return Case(
        graph,
        focus,
        viewer,
        draw(st.none() | st.integers(-(2**63), 2**63 - 1)),
        draw(st.sampled_from([1, 2, 2, 3])),
        FocusContextParams(dedupe_across_depths=draw(st.booleans())),
        draw(st.sampled_from([2001, 2600, 7000])),
    )


# -- exactness -------------------------------------------------------------------------------------
@SETTINGS
@given(cases())
def test_one_trace_cuts_to_the_live_result_and_to_doughnuts_procedure_for_every_budget(
    case: Case,
) -> None:
    traced = case.trace()
    for budget in case.budgets():
        live = case.live(budget)
        small = cut(case.trace(budget), budget)
        expected = reference_result(
            case.graph,
            case.focus,
            budget,
            viewer=case.viewer,
            seed=case.seed,
            max_depth=case.max_depth,
            dedupe_across_depths=case.params.dedupe_across_depths,
        )
        got = cut(traced, budget)
        assert result_json(got) == result_json(small) == result_json(live) == result_json(expected)
        assert render_markdown(got, case.max_depth) == render_markdown(small, case.max_depth)


@SETTINGS
@given(cases())
def test_a_trace_survives_storage_in_both_forms_and_a_replay_joins_the_same_bytes(case: Case) -> None:
    traced = case.trace()
    stored = Trace.from_bytes(traced.to_bytes())
    legacy = Trace.from_bytes(orjson.dumps(traced.to_json()))  # the JSON form, written before
    lines_2 = Trace.from_bytes(format_2(traced))  # the stored form before format 3
    assert stored == traced == legacy == lines_2
    wants = {}
    for budget in case.budgets():
        want = wants[budget] = result_json(cut(traced, budget))
        assert cut_json(stored, budget) == cut_json(traced, budget) == cut_json(lines_2, budget) == want
        assert result_json(cut(stored, budget)) == result_json(cut(legacy, budget)) == want
        markdown = render_markdown(cut(traced, budget), case.max_depth)
        assert render_markdown(cut(stored, budget), case.max_depth) == markdown
    again = Trace.from_bytes(traced.to_bytes())  # what cuts keep on a trace, kept in another order
    for budget in sorted(wants, reverse=True):
        assert cut_json(again, budget) == cut_json(again, budget) == wants[budget]


@SETTINGS
@given(cases(), st.data())
def test_a_batch_gives_each_focus_what_it_gets_alone(case: Case, data: st.DataObject) -> None:
    graph = case.graph
    foci = sorted({case.focus, *data.draw(st.lists(st.sampled_from(sorted(graph.notes)), max_size=8))})
    alone: dict[int, Any] = {}
    rounds_alone = 0
    for focus in foci:
        graph.asked.clear()
        try:
            alone[focus] = result_json(result_of(graph, focus, 2000, **case.request()))
        except GraphRagError as error:  # NoteNotFound, NoteNotReadable: the batch must give the same
            alone[focus] = repr(error)
        rounds_alone = max(rounds_alone, len(graph.asked))
    graph.asked.clear()
    view = WikiView()
    jobs = {
        f: focus_context(
            view,
            case.params,
            FocusRequest(f, seed=case.seed, viewer=case.viewer, max_depth=case.max_depth),
        )
        for f in foci
    }
    together = run_batch(jobs, view, graph.loader(view))  # type: ignore[arg-type]
    for focus, outcome in together.items():
        shown = repr(outcome) if isinstance(outcome, Exception) else result_json(outcome)  # type: ignore[arg-type]
        assert shown == alone[focus]
    assert len(graph.asked) <= rounds_alone


@SETTINGS
@given(cases(), st.data())
def test_traces_of_a_shared_view_are_the_traces_alone_facts_included(
    case: Case, data: st.DataObject
) -> None:
    """What a view remembers it derived (a note's fields and URI, a parent's readable targets)
    gives a later focus of the workspace the same trace, with the same facts, as a fresh view."""
    graph = case.graph
    foci = sorted({case.focus, *data.draw(st.lists(st.sampled_from(sorted(graph.notes)), max_size=8))})
    request = case.request()
    params = request.pop("params")

    def traced(focus: int, view: WikiView) -> Any:
        job = trace(view, params, FocusRequest(focus, token_limit=1, max_token_limit=2000, **request))
        return run_batch({focus: job}, view, graph.loader(view))[focus]

    shared = WikiView()
    for focus in foci:
        together, alone = traced(focus, shared), traced(focus, WikiView())
        assert repr(together) == repr(alone)
        if isinstance(alone, Trace):
            assert together == alone and together.facts == alone.facts


def test_a_view_forgets_what_it_derived_when_a_load_changes_its_data() -> None:
    view = WikiView()
    view.put_notes([WikiNote(1, 1, None, "N1", None, 0)])
    view.derived["uri", 1] = ("[[N1]]", frozenset({"note:1"}))
    view.put_absent_notes([1, 2])  # fills gaps only: nothing replaced
    view.put_notes([WikiNote(1, 1, None, "N1", None, 0)])  # delivered again, as it was
    assert ("uri", 1) in view.derived
    view.put_notes([WikiNote(1, 1, None, "renamed", None, 0)])
    assert view.derived == {}


# -- structure -------------------------------------------------------------------------------------
def ids_of(uris: tuple[str, ...]) -> list[int]:
    found = [URI.match(u) for u in uris]
    assert all(found), uris
    return [int(m.group(1)) for m in found if m]


def linked(graph: WikiGraph, a: int, b: int) -> bool:
    return any((s, t) in ((a, b), (b, a)) for _, s, t in graph.rows)


def crc_key(note_id: int, seed: int | None) -> tuple[int, int]:
    return (note_id, 0) if seed is None else (zlib.crc32(f"{note_id}{seed}".encode()), note_id)


def cost(note: RelatedNoteOut) -> int:
    return max(1, java_estimate(note.content))


@SETTINGS
@given(cases())
def test_paths_caps_orders_and_budgets_hold(case: Case) -> None:
    graph, traced = case.graph, case.trace()
    for budget in case.budgets():
        result = cut(traced, budget)
        focus = result.focus_note
        assert len(focus.inbound_references) <= 20 and len(focus.sample_siblings) <= 6
        for sample in (ids_of(focus.inbound_references), ids_of(focus.sample_siblings)):
            assert sample == sorted(sample, key=lambda i: crc_key(i, case.seed))
        shown = ids_of(focus.outgoing_links + focus.inbound_references + focus.sample_siblings)
        assert not any(graph.notes[i].deleted for i in shown)
        check_related(case, result, budget)


def check_related(case: Case, result: FocusContextResult, budget: int) -> None:
    graph = case.graph
    related_budget = max(0, budget - java_estimate(result.focus_note.content))
    peers_on = related_budget >= 100
    wiki_budget = related_budget * 3 // 4 if peers_on else related_budget
    wiki = [n for n in result.related_notes if len(n.retrieval_path) == n.depth + 1]
    peers = [n for n in result.related_notes if len(n.retrieval_path) == n.depth]
    assert len(wiki) + len(peers) == len(result.related_notes)
    assert result.related_notes[: len(wiki)] == tuple(wiki)  # wiki notes first
    inbound_per_parent: dict[tuple[int, int], int] = {}
    for note in wiki:
        chain = [case.focus, *ids_of(note.retrieval_path[1:])]
        assert note.retrieval_path[0] == f"[[N{case.focus}]]" and note.title == f"N{chain[-1]}"
        assert all(linked(graph, a, b) for a, b in pairwise(chain))
        assert not graph.notes[chain[-1]].deleted and note.depth <= case.max_depth
        if chain[-1] not in graph.targets(chain[-2]):
            key = (chain[-2], note.depth)
            inbound_per_parent[key] = inbound_per_parent.get(key, 0) + 1
    assert all(n <= (6 if depth == 1 else 2) for (_, depth), n in inbound_per_parent.items())
    if wiki:
        assert sum(map(cost, wiki)) - cost(wiki[-1]) < wiki_budget
    assert sum(map(cost, peers)) <= (related_budget - wiki_budget if peers_on else 0)
    for note in peers:
        peer = graph.notes[int(note.title[1:])]
        anchor = graph.notes[[case.focus, *ids_of(note.retrieval_path[1:])][-1]]
        same_group = peer.folder_id == anchor.folder_id and (
            peer.folder_id is not None or peer.notebook_id == anchor.notebook_id
        )
        assert not peer.deleted and same_group and note.depth in (1, 2)


# -- invalidation ----------------------------------------------------------------------------------
def mutate(graph: WikiGraph, kind: str, x: int, y: int) -> set[str]:
    """Apply one edit and return the facts its change event names."""
    note = graph.notes.get(x)
    if note is None:
        return set()
    group = f"{note.notebook_id if note.notebook_id is not None else 'none'}:{note.folder_id or 'root'}"
    if kind == "content":
        graph.notes[x] = replace(note, content=(note.content or "") + " edited", title=f"N{x}")
        return {f"note:{x}", f"links:{x}"}
    if kind == "link":
        graph.link(x, y)
        return {f"note:{x}", f"links:{x}", f"inbound:{y}"}
    if kind == "delete":
        graph.notes[x] = replace(note, deleted=not note.deleted)
        referrers = {s for _, s, t in graph.rows if t == x}
        return (
            {f"note:{x}", f"peers:{group}"}
            | {f"inbound:{t}" for t in graph.targets(x)}
            | {f"links:{r}" for r in referrers}
        )
    if kind == "folder" and note.folder_id is not None:
        folder = graph.folders[note.folder_id]
        graph.folders[folder.id] = replace(folder, name=folder.name + "x")
        return {f"folder:{folder.id}"}
    if kind == "notebook" and note.notebook_id is not None:
        notebook = graph.notebooks[note.notebook_id]
        graph.notebooks[notebook.id] = replace(notebook, name=notebook.name + "x")
        return {f"notebook:{notebook.id}"}
    return set()


@SETTINGS
@given(cases(), st.sampled_from(["content", "link", "delete", "folder", "notebook"]), st.data())
def test_an_edit_that_names_no_fact_of_a_trace_does_not_change_it(
    case: Case, kind: str, data: st.DataObject
) -> None:
    traced = case.trace()
    edited = copy.deepcopy(case.graph)
    x = data.draw(st.sampled_from(sorted(edited.notes)))
    y = data.draw(st.sampled_from(sorted(edited.notes)))
    if x == case.focus or mutate(edited, kind, x, y) & traced.facts:
        return
    again = case.trace(graph=edited)
    for budget in case.budgets():
        assert result_json(cut(again, budget)) == result_json(cut(traced, budget))
