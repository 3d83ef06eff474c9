"""Scenarios of Doughnut 2026's FocusContext, in our words: the focus note, the wiki BFS, caps, seeds,
nested folders and tight budgets (what Doughnut's own tests pin, and what they leave open).

Each graph is built in memory (tests.wiki_support) and answered as Doughnut's SQL would; notes get
ids 1, 2, 3, ... in creation order, which is also their seedless sampling order.
"""

from __future__ import annotations

import dataclasses

import pytest

from graphrag.core.errors import NoteNotFound
from graphrag.wiki.focus.context import (
    FocusContextParams,
)
from graphrag.wiki.focus.render import result_json
from graphrag.wiki.model import sample_key
from tests.storage.wiki_rows import random_graph
from tests.wiki_support import (
    OWNER,
    H,
    WikiGraph,
    by_title,
    crc,
    one_notebook,
    peer_notes,
    result_of,
    titles,
    wiki_notes,
)


# -- the focus note --------------------------------------------------------------------------------
def test_a_lone_note_has_its_fields_and_nothing_related() -> None:
    graph, nb = one_notebook()
    lone = graph.note("Alone", nb, content=H + "quiet")
    result = result_of(graph, lone)
    focus = result.focus_note
    assert (focus.notebook, focus.title, focus.folder_path, focus.depth) == ("NB", "Alone", "", 0)
    assert focus.outgoing_links == focus.inbound_references == focus.sample_siblings == ()
    assert (focus.content, focus.content_truncated) == (H + "quiet", False)
    assert result.related_notes == ()


def test_a_long_focus_body_is_cut_to_1500_tokens_of_bytes() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Long", nb, content="a" * 10_000)
    shown = result_of(graph, focus).focus_note
    assert shown.content == "a" * 5625  # 1500 tokens * 3.75 bytes
    assert shown.content_truncated


def test_a_small_budget_cuts_the_focus_body_further() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Long", nb, content="é" * 100)  # 200 bytes
    shown = result_of(graph, focus, token_limit=10).focus_note
    assert shown.content == "é" * 18  # floor(37.5) = 37 bytes hold 18 two-byte characters
    assert shown.content_truncated


def test_token_limit_zero_empties_the_body_and_relates_nothing() -> None:
    graph, nb = one_notebook()
    focus = graph.note("F", nb, content=H + "body")
    graph.link(focus, graph.note("T", nb))
    result = result_of(graph, focus, token_limit=0)
    assert (result.focus_note.content, result.focus_note.content_truncated) == ("", True)
    assert result.related_notes == () and result.focus_note.sample_siblings == ()
    assert result.focus_note.outgoing_links == ("[[NB: T]]",)


def test_null_and_empty_bodies_stay_as_they_are() -> None:
    graph, nb = one_notebook()
    for content in (None, ""):
        focus = graph.note(f"F{content!r}", nb, content=content)
        shown = result_of(graph, focus, token_limit=0).focus_note
        assert (shown.content, shown.content_truncated) == (content, False)


def test_a_deleted_or_absent_focus_is_not_found() -> None:
    graph, nb = one_notebook()
    gone = graph.note("Gone", nb, deleted=True)
    with pytest.raises(NoteNotFound):
        result_of(graph, gone)
    with pytest.raises(NoteNotFound):
        result_of(graph, 999)


def test_titles_and_names_are_trimmed_as_doughnut_reads_them() -> None:
    graph = WikiGraph()
    nb = graph.notebook("  Spaced NB\u200b", user=OWNER)
    folder = graph.folder(nb, " Outer ")
    focus = graph.note("\u3000Focus ", nb, folder)
    graph.link(focus, graph.note(" Target", nb))
    result = result_of(graph, focus)
    assert (result.focus_note.notebook, result.focus_note.title) == ("Spaced NB", "Focus")
    assert result.focus_note.folder_path == "Outer"
    assert result.focus_note.outgoing_links == ("[[Spaced NB: Target]]",)
    assert by_title(result, "Target").retrieval_path == ("[[Focus]]", "[[Spaced NB: Target]]")


# -- outgoing and inbound at depth 1 ---------------------------------------------------------------
def test_an_outgoing_link_is_a_depth_one_note_with_a_two_step_path() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb, content=H + "see [[Target]]")
    graph.link(focus, graph.note("Target", nb, content=H + "target body"))
    result = result_of(graph, focus)
    target = by_title(result, "Target")
    assert (target.depth, target.retrieval_path) == (1, ("[[Focus]]", "[[NB: Target]]"))
    assert (target.notebook, target.content, target.content_truncated) == (
        "NB",
        H + "target body",
        False,
    )
    assert result.focus_note.outgoing_links == ("[[NB: Target]]",)


def test_a_referrer_is_the_only_related_note() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb)
    graph.link(graph.note("Referrer", nb), focus)
    result = result_of(graph, focus, token_limit=99)  # no folder peers below 100
    assert titles(result) == ["Referrer"]
    assert result.focus_note.inbound_references == ("[[NB: Referrer]]",)


def test_a_mutual_link_appears_once() -> None:
    graph, nb = one_notebook()
    focus, other = graph.note("Focus", nb), graph.note("Mutual", nb)
    graph.link(focus, other)
    graph.link(other, focus)
    result = result_of(graph, focus)
    assert titles(result) == ["Mutual"]
    assert result.focus_note.inbound_references == ("[[NB: Mutual]]",)  # still listed there


def test_display_variants_of_one_target_count_once_in_row_order() -> None:
    graph, nb = one_notebook()
    focus, b, a = graph.note("Focus", nb), graph.note("B", nb), graph.note("A", nb)
    graph.link(focus, b, a, b)
    assert result_of(graph, focus).focus_note.outgoing_links == ("[[NB: B]]", "[[NB: A]]")


def test_a_self_link_is_listed_but_never_related() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb)
    graph.link(focus, focus)
    result = result_of(graph, focus)
    assert result.focus_note.outgoing_links == ("[[NB: Focus]]",)
    assert result.focus_note.inbound_references == ()
    assert result.related_notes == ()


# -- depth ----------------------------------------------------------------------------------------
def test_an_outgoing_chain_reaches_depth_two() -> None:
    graph, nb = one_notebook()
    root, mid, leaf = graph.note("Root", nb), graph.note("Mid", nb), graph.note("Leaf", nb)
    graph.link(root, mid)
    graph.link(mid, leaf)
    result = result_of(graph, root)
    assert by_title(result, "Leaf").depth == 2
    assert by_title(result, "Leaf").retrieval_path == ("[[Root]]", "[[NB: Mid]]", "[[NB: Leaf]]")


def test_max_depth_one_stops_after_the_first_hop() -> None:
    graph, nb = one_notebook()
    root, mid, leaf = graph.note("Root", nb), graph.note("Mid", nb), graph.note("Leaf", nb)
    graph.link(root, mid)
    graph.link(mid, leaf)
    assert titles(result_of(graph, root, token_limit=99, max_depth=1)) == ["Mid"]


def test_max_depth_zero_relates_nothing() -> None:
    graph, nb = one_notebook()
    root = graph.note("Root", nb)
    graph.link(root, graph.note("Mid", nb))
    result = result_of(graph, root, max_depth=0)
    assert result.related_notes == () and result.focus_note.outgoing_links == ("[[NB: Mid]]",)


def test_a_two_note_cycle_does_not_loop() -> None:
    graph, nb = one_notebook()
    a, b = graph.note("A", nb), graph.note("B", nb)
    graph.link(a, b)
    graph.link(b, a)
    assert titles(result_of(graph, a)) == ["B"]


def test_a_referrer_of_a_referrer_arrives_at_depth_two() -> None:
    graph, nb = one_notebook()
    focus, hub, far = graph.note("Root", nb), graph.note("Hub", nb), graph.note("Far", nb)
    graph.link(hub, focus)
    graph.link(far, hub)
    result = result_of(graph, focus)
    assert [(n.title, n.depth) for n in wiki_notes(result)] == [("Hub", 1), ("Far", 2)]


def cross_depth_graph() -> tuple[WikiGraph, int]:
    graph, nb = one_notebook()
    focus, direct, bridge = graph.note("Focus", nb), graph.note("Direct", nb), graph.note("Bridge", nb)
    graph.link(focus, direct, bridge)
    graph.link(bridge, direct)
    return graph, focus


def test_notes_emitted_at_depth_one_come_again_at_depth_two_as_doughnut_does() -> None:
    graph, focus = cross_depth_graph()
    result = result_of(graph, focus)
    # Depth 2 proposes Bridge (a referrer of Direct) and Direct (a target of Bridge) again.
    assert [(n.title, n.depth, len(n.retrieval_path)) for n in result.related_notes] == [
        ("Direct", 1, 2),
        ("Bridge", 1, 2),
        ("Bridge", 2, 3),
        ("Direct", 2, 3),
    ]
    assert by_title(result, "Direct").retrieval_path == ("[[Focus]]", "[[NB: Direct]]")


def test_the_dedupe_option_drops_notes_emitted_at_an_earlier_depth() -> None:
    graph, focus = cross_depth_graph()
    params = FocusContextParams(dedupe_across_depths=True)
    assert [(n.title, n.depth) for n in result_of(graph, focus, params=params).related_notes] == [
        ("Direct", 1),
        ("Bridge", 1),
    ]


def test_within_a_depth_the_first_proposal_of_a_note_wins() -> None:
    graph, nb = one_notebook()
    focus, a, b, x = (graph.note(t, nb) for t in ("Focus", "A", "B", "X"))
    graph.link(focus, a, b)
    graph.link(a, x)
    graph.link(b, x)
    result = result_of(graph, focus)
    assert [n.title for n in result.related_notes] == ["A", "B", "X"]
    assert by_title(result, "X").retrieval_path == ("[[Focus]]", "[[NB: A]]", "[[NB: X]]")


def test_a_spent_wiki_budget_leaves_later_notes_to_the_folder_peers() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Root", nb, content="[[S1]] [[S2]] [[S3]] [[S4]] [[Bridge]]")  # 38 bytes: 11
    spends = [graph.note(f"S{i}", nb, content="z" * 600) for i in range(1, 5)]  # 160 tokens each
    bridge, leaf = graph.note("Bridge", nb, content="[[Leaf]]."), graph.note("Leaf", nb, content="x")
    graph.link(focus, *spends, bridge)
    graph.link(bridge, leaf)
    result = result_of(graph, focus, token_limit=800)
    # R = 789: wiki budget 591 is spent by S1-S4 (640, the last one overshooting).
    assert [n.title for n in wiki_notes(result)] == ["S1", "S2", "S3", "S4"]
    assert [(n.title, n.depth, n.retrieval_path) for n in peer_notes(result)] == [
        ("Bridge", 1, ("[[Root]]",)),
        ("Leaf", 1, ("[[Root]]",)),
    ]


def test_depth_two_referrers_are_capped_at_two_per_parent() -> None:
    graph, nb = one_notebook()
    focus, hub = graph.note("Focus", nb), graph.note("Hub", nb)
    graph.link(focus, hub)
    referrers = [graph.note(f"R{i}", nb) for i in range(5)]
    for referrer in referrers:
        graph.link(referrer, hub)
    result = result_of(graph, focus, token_limit=99)
    assert [(n.title, n.depth) for n in wiki_notes(result)] == [("Hub", 1), ("R0", 2), ("R1", 2)]


def test_depth_one_referrers_are_capped_at_six_and_twenty_are_listed() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb)
    referrers = [graph.note(f"R{i:02}", nb) for i in range(21)]
    for referrer in referrers:
        graph.link(referrer, focus)
    result = result_of(graph, focus, token_limit=99)
    assert titles(result) == [f"R{i:02}" for i in range(6)]
    assert result.focus_note.inbound_references == tuple(f"[[NB: R{i:02}]]" for i in range(20))


def test_outgoing_targets_are_excluded_from_the_referrer_sample_before_the_cap() -> None:
    graph, nb = one_notebook()
    focus, both = graph.note("Focus", nb), graph.note("Both", nb)  # Both has the lowest referrer id
    others = [graph.note(f"R{i}", nb) for i in range(7)]
    graph.link(focus, both)
    for referrer in (both, *others):
        graph.link(referrer, focus)
    result = result_of(graph, focus, token_limit=99)
    assert titles(result)[:7] == ["Both", "R0", "R1", "R2", "R3", "R4", "R5"]
    assert by_title(result, "Both").retrieval_path == ("[[Focus]]", "[[NB: Both]]")


def test_every_outgoing_target_that_also_refers_back_is_excluded_before_the_cap() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb)
    mutual = [graph.note(f"Both{i}", nb) for i in range(3)]  # the lowest referrer ids
    others = [graph.note(f"R{i}", nb) for i in range(7)]
    graph.link(focus, *mutual)
    for referrer in (*mutual, *others):
        graph.link(referrer, focus)
    result = result_of(graph, focus, token_limit=99)
    assert titles(result) == ["Both0", "Both1", "Both2", "R0", "R1", "R2", "R3", "R4", "R5"]


def test_at_depth_two_too_the_exclusions_come_before_the_cap() -> None:
    graph, nb = one_notebook()
    focus, hub = graph.note("Focus", nb), graph.note("Hub", nb)
    mutual = [graph.note(f"Both{i}", nb) for i in range(2)]
    others = [graph.note(f"R{i}", nb) for i in range(3)]
    graph.link(focus, hub)
    graph.link(hub, *mutual)
    for referrer in (*mutual, *others):
        graph.link(referrer, hub)
    result = result_of(graph, focus, token_limit=99)
    assert [(n.title, n.depth) for n in result.related_notes] == [
        ("Hub", 1),
        ("Both0", 2),
        ("Both1", 2),
        ("R0", 2),
        ("R1", 2),
    ]


@pytest.mark.parametrize(
    ("note_id", "seed", "mysql_crc"),
    [  # SELECT CRC32(CONCAT(CAST(id AS CHAR), CAST(seed AS CHAR))) on MariaDB
        (16, 1, 36358138),
        (16, -5, 1068255030),
        (123456, -9_223_372_036_854_775_808, 725691037),
        (7, 9_223_372_036_854_775_807, 2353595777),
    ],
)
def test_the_sampling_key_is_mysqls_crc32(note_id: int, seed: int, mysql_crc: int) -> None:
    assert sample_key(note_id, seed) == (mysql_crc, note_id)
    assert sample_key(note_id, None) < sample_key(note_id + 1, None)


def test_a_seed_orders_samples_by_crc32_of_id_and_seed() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb)
    referrers = [graph.note(f"R{i:02}", nb) for i in range(21)]
    for referrer in referrers:
        graph.link(referrer, focus)
    for seed in (1, 42, -9_223_372_036_854_775_808):
        expected = sorted(referrers, key=lambda i: (crc(i, seed), i))[:6]
        result = result_of(graph, focus, token_limit=99, seed=seed)
        assert titles(result) == [graph.notes[i].title for i in expected]
    samples = {tuple(titles(result_of(graph, focus, token_limit=99, seed=s))) for s in range(2, 6)}
    assert len(samples) > 1


# -- folders, budgets, the worked example ----------------------------------------------------------
def test_nested_folders_make_the_folder_path() -> None:
    graph, nb = one_notebook()
    outer = graph.folder(nb, "Outer")
    inner = graph.folder(nb, "Inner", outer)
    leaf = graph.folder(nb, "Leaf", inner)
    focus = graph.note("Focus", nb, leaf)
    graph.link(focus, graph.note("Target", nb, inner))
    result = result_of(graph, focus)
    assert result.focus_note.folder_path == "Outer / Inner / Leaf"
    assert by_title(result, "Target").folder_path == "Outer / Inner"


@pytest.mark.parametrize(("limit", "related"), [(1, 1), (4, 1), (5, 2), (6, 2), (9, 3)])
def test_tiny_budgets_keep_the_note_that_overshoots(limit: int, related: int) -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb, content=None)
    targets = [graph.note(f"T{i}", nb, content="t" * 15) for i in range(3)]  # 4 tokens each
    graph.link(focus, *targets)
    result = result_of(graph, focus, token_limit=limit)
    assert titles(result) == [f"T{i}" for i in range(related)]


@pytest.mark.parametrize("seed", [3, 8, 21])
def test_a_deleted_focus_read_as_doughnuts_api_reads_it_is_answered_as_when_it_was_live(
        seed: int) -> None:
    """Doughnut's API loads a deleted note like any other and every list the procedure reads
    leaves the focus out anyway, so its deletion changes nothing of its own context but a link to
    itself, whose target is now deleted and dropped as any deleted target is."""
    graph = random_graph(seed, notes=30)
    for focus, note in list(graph.notes.items()):
        if note.deleted or note.notebook_id is None:
            continue
        live = result_of(graph, focus)
        graph.notes[focus] = dataclasses.replace(note, deleted=True)
        try:
            with pytest.raises(NoteNotFound):
                result_of(graph, focus)
            gone = result_of(graph, focus, read_deleted=True)
        finally:
            graph.notes[focus] = note
        if focus in graph.targets(focus):  # the self-link's target is deleted now: one link less
            before, after = live.focus_note.outgoing_links, gone.focus_note.outgoing_links
            assert len(after) == len(before) - 1 and set(after) < set(before), focus
            continue
        assert result_json(gone) == result_json(live), focus
