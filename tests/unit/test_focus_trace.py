"""Traces (size, facts), the wiki needs, the view and batching."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from graphrag.core.batch import run_batch
from graphrag.wiki.focus.context import (
    FocusContextParams,
    FocusRequest,
    TraceTooSmall,
    cut,
    focus_context,
)
from graphrag.wiki.focus.cut import cut_json
from graphrag.wiki.focus.render import path_json
from graphrag.wiki.focus.trace import Trace
from graphrag.wiki.model import Viewer, WikiNeed
from graphrag.wiki.view import WikiView
from tests.wiki_support import OWNER, format_2, one_notebook, trace_of


# -- traces ---------------------------------------------------------------------------------------
def test_a_trace_refuses_budgets_above_its_size() -> None:
    graph, nb = one_notebook()
    traced = trace_of(graph, graph.note("F", nb), max_token_limit=500)
    cut(traced, 500)
    with pytest.raises(TraceTooSmall):
        cut(traced, 501)


def test_the_trace_names_the_facts_it_read() -> None:
    graph, nb = one_notebook()
    folder = graph.folder(nb, "F")
    focus = graph.note("Focus", nb, folder)
    target, referrer = graph.note("T", nb), graph.note("R", nb, folder)
    graph.link(focus, target)
    graph.link(referrer, focus)
    facts = trace_of(graph, focus).facts
    expected = {
        f"note:{focus}",
        f"note:{target}",
        f"note:{referrer}",
        f"links:{focus}",
        f"inbound:{focus}",
        f"links:{target}",
        f"inbound:{target}",
        f"links:{referrer}",
        f"inbound:{referrer}",
        f"peers:{nb}:{folder}",
        f"peers:{nb}:root",
        f"folder:{folder}",
        f"notebook:{nb}",
    }
    assert expected <= facts
    assert {f.split(":")[0] for f in facts} <= {
        "note",
        "links",
        "inbound",
        "peers",
        "folder",
        "notebook",
    }


def test_a_small_budget_reads_less_than_a_large_one() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb, content="f" * 7000)  # eats the whole budget below 1500 tokens
    hub = graph.note("Hub", nb)
    graph.link(focus, hub)
    graph.link(hub, graph.note("Far", nb))
    small = trace_of(graph, focus, max_token_limit=500)
    large = trace_of(graph, focus, max_token_limit=3000)
    assert f"links:{hub}" not in small.facts and f"links:{hub}" in large.facts
    assert small.sample_siblings is None and large.sample_siblings is not None


# -- needs, the view and batching -----------------------------------------------------------------
def test_wiki_needs_merge_and_keep_the_longer_ask() -> None:
    viewer = Viewer(user_id=OWNER)
    a = WikiNeed.of(notes={1}, referrers={(5, None, viewer): 3}, peers={(1, None, 7): 2})
    b = WikiNeed.of(folders={2}, referrers={(5, None, viewer): 9}, access={(viewer, 1)})
    merged = a | b
    assert isinstance(merged, WikiNeed)
    assert merged.referrer_lengths() == {(5, None, viewer): 9} and merged.peer_lengths() == {
        (1, None, 7): 2
    }
    assert merged.size() == 5 and bool(merged) and not WikiNeed()


def test_the_view_keeps_the_longest_prefix_and_answers_shorter_asks_from_it() -> None:
    view, key = WikiView(), (5, None, Viewer(user_id=OWNER))
    view.put_referrers(key, [1, 2, 3], complete=False)
    view.put_referrers(key, [1], complete=False)
    assert view.referrers(key, 2) == (1, 2, 3)
    assert view.missing(WikiNeed.of(referrers={key: 4})).referrer_lengths() == {key: 4}
    view.put_referrers(key, [1, 2], complete=True)  # a complete list answers any length
    assert view.referrers(key, 50) == (1, 2)
    assert not view.missing(WikiNeed.of(referrers={key: 50}))


def test_the_view_follows_folder_chains_as_far_as_they_are_loaded() -> None:
    graph, nb = one_notebook()
    outer = graph.folder(nb, "Outer")
    inner = graph.folder(nb, "Inner", outer)
    view = WikiView()
    view.put_folders([graph.folders[inner]])
    assert view.missing(WikiNeed.of(folders={inner})).folders == {outer}
    view.put_folders([graph.folders[outer]])
    assert [f.name for f in view.folder_chain(inner)] == ["Outer", "Inner"]


def test_a_batch_of_foci_shares_its_rounds() -> None:
    graph, nb = one_notebook()
    folder = graph.folder(nb, "F")
    notes = [graph.note(f"N{i}", nb, folder if i % 2 else None) for i in range(30)]
    for i, note in enumerate(notes):
        graph.link(note, notes[(i * 7 + 3) % 30], notes[(i * 11 + 5) % 30])
    view = WikiView()
    params = FocusContextParams()
    jobs = {n: focus_context(view, params, FocusRequest(n)) for n in notes}
    results = run_batch(jobs, view, graph.loader(view))  # type: ignore[arg-type]
    # notes+links, notebook+folders, access+referrers, depth-1 links, depth-2 referrers, peers
    assert len(graph.asked) <= 6
    assert all(not isinstance(r, Exception) for r in results.values())


@pytest.mark.parametrize("form", ["stored", "json"])
def test_a_parsed_trace_reads_its_ladder_and_notes_as_the_built_one_does(form: str) -> None:
    traced = _any_trace()
    parsed = Trace.from_bytes(traced.to_bytes() if form == "stored" else orjson.dumps(traced.to_json()))
    if traced.wiki:  # a step read out of order first: the ladder is still the built one
        assert parsed.wiki[-1] == traced.wiki[-1]
    assert parsed == traced and list(parsed.wiki) == list(traced.wiki)
    if traced.wiki:
        assert parsed.wiki[-1] == traced.wiki[-1] and parsed.wiki[0] == traced.wiki[0]
    with pytest.raises(IndexError):
        parsed.wiki[len(traced.wiki)]
    with pytest.raises(IndexError):
        parsed.wiki[-len(traced.wiki) - 1]
    assert dict(parsed.notes) == dict(traced.notes) and len(parsed.notes) == len(traced.notes) > 0
    assert all(parsed.notes.cost(i) == n.cost and parsed.notes.fragments(i) == n.fragments
               for i, n in traced.notes.items())
    assert parsed.notes.cost(max(traced.notes) + 1) is None


def test_a_trace_writes_the_same_bytes_each_time_and_after_a_round_trip() -> None:
    # (a note's fragments, its member and the parameters are built once and reused by every
    # trace written)
    traced = _any_trace()
    written, json_form = traced.to_bytes(), orjson.dumps(traced.to_json())
    assert traced.to_bytes() == written and Trace.from_bytes(written).to_bytes() == written
    assert orjson.dumps(Trace.from_json(orjson.loads(json_form)).to_json()) == json_form
    traced.to_json()["params"]["max_depth"] = 99  # a caller's copy, not the remembered one
    assert orjson.dumps(traced.to_json()) == json_form and b'"max_depth":99' not in json_form
    assert traced.to_bytes() == written


@pytest.mark.parametrize("damage", [
    lambda b: b.replace(b'"format":3', b'"format":4'),
    lambda b: b.rsplit(b"\n", 1)[0],  # a note's line missing
    lambda b: b + b"\n{}",  # a line too many
    lambda b: b.replace(b'"noteCosts":[', b'"noteCosts":[1,'),
    lambda b: b.replace(b'"lineBytes":[', b'"lineBytes":[1,'),
    lambda b: b.replace(b'"lineBytes":[', b'"lineBytes":[-1,0,'),
    lambda b: b.replace(b'"noteCosts":[', b'"noteCosts":["x",'),
    lambda b: b.replace(b'"lineBytes":[', b'"lineBytes":[0.0,'),
    lambda b: b.replace(b'"noteGroups":[', b'"noteGroups":[[],'),
    lambda b: re.sub(rb'"wikiIds":\[\d+', b'"wikiIds":[99999', b),  # a step not held
    lambda b: re.sub(rb'"wikiDepths":\[\d+', b'"wikiDepths":[1.5', b),
    lambda b: re.sub(rb'"wikiDepths":\[\d+', b'"wikiDepths":[true', b),  # an answer writes it
    lambda b: re.sub(rb'"wikiDepths":\[\d+', b'"wikiDepths":[3', b),  # deeper than maxDepth
    lambda b: re.sub(rb'"wikiDepths":\[\d+', b'"wikiDepths":[0', b),
    lambda b: b.replace(b'"maxDepth":2', b'"maxDepth":100000000'),  # a replay would step through it
    lambda b: b.replace(b'"wikiDepths":[', b'"wikiDepths":[1,'),  # a depth too many
    lambda b: b.replace(b'"wikiIds":[', b'"wikiIds":["x",'),
    lambda b: re.sub(rb'"facts":\[[^\]]*\]', b'"facts":5', b),
])
def test_a_stored_trace_whose_lines_do_not_match_its_first_line_is_refused(damage: Any) -> None:
    written = _any_trace().to_bytes()
    assert damage(written) != written
    with pytest.raises(ValueError):
        Trace.from_bytes(damage(written))


@pytest.mark.parametrize("damage", [
    lambda b: b.replace(b'"format":2', b'"format":5'),
    lambda b: b.rsplit(b"\n", 1)[0],  # a note's line missing
    lambda b: b.replace(b'"lineBytes":[', b'"lineBytes":[-1,0,'),
    lambda b: b.replace(b'"noteCosts":[', b'"noteCosts":["x",'),
    lambda b: b.replace(b'"wiki":[{"id":', b'"wiki":[{"id":99999,"x":'),  # a step not held
    lambda b: b.replace(b',"depth":', b',"depht":', 1),  # a step without its depth
    lambda b: re.sub(rb'"depth":\d+', b'"depth":3', b, count=1),  # deeper than maxDepth
    lambda b: b.replace(b'"maxDepth":2', b'"maxDepth":100000000'),
])
def test_a_trace_stored_before_format_3_is_read_and_checked(damage: Any) -> None:
    traced = _any_trace()
    written = format_2(traced)
    parsed = Trace.from_bytes(written)
    assert parsed == traced and list(parsed.wiki) == list(traced.wiki)
    for limit in (1, 40, 200, traced.max_token_limit):
        assert cut_json(parsed, limit) == cut_json(traced, limit)
    assert damage(written) != written
    with pytest.raises(ValueError):
        Trace.from_bytes(damage(written))


def test_a_stored_traces_facts_are_checked_when_first_read() -> None:
    traced = _any_trace()
    assert Trace.from_bytes(traced.to_bytes()).facts == traced.facts
    odd = Trace.from_bytes(traced.to_bytes().replace(b'"facts":[', b'"facts":[[1],', 1))
    with pytest.raises(ValueError):
        len(odd.facts)


def test_a_stored_ladder_path_is_joined_as_written_and_parsed_only_when_read() -> None:
    traced = _any_trace()
    assert len(traced.wiki) > 0
    parsed = Trace.from_bytes(traced.to_bytes())
    for k, step in enumerate(traced.wiki):
        assert parsed.wiki.path_json(k) == traced.wiki.path_json(k) == path_json(step.path)
        assert parsed.wiki.path(k) == step.path and parsed.wiki.ids[k] == step.note_id
    spoiled = traced.to_bytes().replace(traced.wiki.path_json(0), b"{" + b"x" * (
        len(traced.wiki.path_json(0)) - 2) + b"}", 1)
    broken = Trace.from_bytes(spoiled)  # (a path line is checked when a step is read)
    with pytest.raises(ValueError):
        broken.wiki.path(0)


def _any_trace() -> Trace:
    graph, nb = one_notebook()
    folder = graph.folder(nb, "F")
    focus = graph.note("Focus", nb, folder, content="focus body")
    for k in range(4):
        target = graph.note(f"T{k}", nb, folder, content=f"body {k}")
        graph.link(focus, target)
    return trace_of(graph, focus)
