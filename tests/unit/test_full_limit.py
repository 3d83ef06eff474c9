"""Every tokenLimit from a trace's full limit on gives one answer (graphrag.wiki.focus.cut.full_limit):
a reader keeps that answer once for all of them (service.answers), so the limit must be exact, not
merely likely. Checked against the trace's own cuts and against the live result, on the random
graphs of the focus properties, in JSON and in markdown."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from graphrag.wiki.focus.cut import cut, cut_json, full_limit, shared_limit
from graphrag.wiki.focus.render import render_markdown, result_json
from graphrag.wiki.focus.trace import Trace
from tests.unit.test_focus_properties import SETTINGS, Case, cases
from tests.wiki_support import WikiGraph, trace_of


@SETTINGS
@given(cases(), st.lists(st.integers(0, 30_000), min_size=1, max_size=5))
def test_every_limit_from_the_full_one_gives_its_answer(case: Case, above: list[int]) -> None:
    traced = case.trace()
    full = full_limit(traced)
    if full is None:
        assert all(shared_limit(traced, b) == b for b in (1, 2000, traced.max_token_limit))
        return
    assert traced.params.focus_content_cap <= full <= traced.max_token_limit
    want = cut_json(traced, full)
    markdown = render_markdown(cut(traced, full), case.max_depth)
    most = traced.max_token_limit
    for budget in {full, most, *(min(full + a, most) for a in above)}:
        assert shared_limit(traced, budget) == full
        assert cut_json(traced, budget) == want == result_json(case.live(budget))
        assert render_markdown(cut(traced, budget), case.max_depth) == markdown
    assert shared_limit(traced, full - 1) == full - 1
    assert shared_limit(traced, traced.max_token_limit + 1) == traced.max_token_limit + 1


def test_a_small_neighbourhood_is_shown_whole_from_its_full_limit_on() -> None:
    graph = WikiGraph()
    book = graph.notebook("NB", user=1)
    for i in range(1, 5):
        graph.note(f"N{i}", book, None, "a short body " * i)
    graph.link(1, 2, 3)
    traced = trace_of(graph, 1, 7000, viewer=None, seed=None, max_depth=2)
    full = full_limit(traced)
    assert full is not None and full < 7000
    shown = {r.title for r in cut(traced, full).related_notes}
    assert {"N2", "N3", "N4"} <= shown


def test_a_trace_whose_costs_no_computation_writes_has_no_full_limit() -> None:
    """A cost below 1 (a damaged stored trace) makes the greedy steps non-monotone: a small budget
    may take a free or negative note that a larger one takes after others, so nothing is shared."""
    graph = WikiGraph()
    book = graph.notebook("NB", user=1)
    for i in range(1, 8):
        graph.note(f"N{i}", book, None, "a body of some length " * 30)
    traced = trace_of(graph, 1, 7000, viewer=None, seed=None, max_depth=2)
    assert full_limit(traced) is not None
    head, _, rest = traced.to_bytes().partition(b"\n")
    fields = orjson.loads(head)
    for damaged in (0, -900):
        fields["noteCosts"] = [*fields["noteCosts"][:-1], damaged]
        broken = Trace.from_bytes(orjson.dumps(fields) + b"\n" + rest)
        assert full_limit(broken) is None and shared_limit(broken, 7000) == 7000
