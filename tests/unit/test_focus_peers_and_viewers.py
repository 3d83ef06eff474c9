"""Scenarios of Doughnut 2026's FocusContext: folder peers, deleted notes, notes without a notebook,
other notebooks and other viewers (owner, subscriber, circle member, bazaar).
"""

from __future__ import annotations

import pytest

from graphrag.wiki.focus.context import NoteNotReadable
from graphrag.wiki.focus.render import result_json
from graphrag.wiki.model import Viewer
from tests.wiki_support import (
    OTHER,
    OWNER,
    WikiGraph,
    by_title,
    crc,
    one_notebook,
    peer_notes,
    result_of,
    titles,
)


# -- folder peers ---------------------------------------------------------------------------------
def test_the_folder_gives_six_sample_siblings_in_id_order() -> None:
    graph, nb = one_notebook()
    folder = graph.folder(nb, "Big")
    focus = graph.note("Focus", nb, folder)
    members = [graph.note(f"M{i:02}", nb, folder) for i in range(25)]
    result = result_of(graph, focus)
    assert result.focus_note.sample_siblings == tuple(
        f"[[NB: {graph.notes[i].title}]]" for i in members[:6]
    )
    assert [n.title for n in peer_notes(result)] == [f"M{i:02}" for i in range(6)]
    assert all(n.depth == 1 and n.retrieval_path == ("[[Focus]]",) for n in peer_notes(result))


def test_the_notebook_root_gives_six_sample_siblings_too() -> None:
    graph, nb = one_notebook()
    members = [graph.note(f"M{i:02}", nb) for i in range(10)]
    elsewhere = graph.folder(nb, "Elsewhere")
    graph.note("Foldered", nb, elsewhere)
    result = result_of(graph, members[4])
    assert len(result.focus_note.sample_siblings) == 6
    assert "[[NB: M04]]" not in result.focus_note.sample_siblings
    assert "[[NB: Foldered]]" not in result.focus_note.sample_siblings


def test_seeded_sibling_samples_are_stable_and_differ_between_seeds() -> None:
    graph, nb = one_notebook()
    folder = graph.folder(nb, "Big")
    focus = graph.note("Focus", nb, folder)
    members = [graph.note(f"M{i:02}", nb, folder) for i in range(25)]
    for seed in (None, 42):
        first, again = result_of(graph, focus, seed=seed), result_of(graph, focus, seed=seed)
        assert first == again
    expected = sorted(members, key=lambda i: (crc(i, 7), i))[:6]
    siblings = result_of(graph, focus, seed=7).focus_note.sample_siblings
    assert siblings == tuple(f"[[NB: {graph.notes[i].title}]]" for i in expected)
    assert (
        len(
            {frozenset(result_of(graph, focus, seed=s).focus_note.sample_siblings) for s in range(2, 11)}
        )
        > 1
    )


def test_a_tight_budget_has_no_siblings_and_no_peers() -> None:
    graph, nb = one_notebook()
    folder = graph.folder(nb, "F")
    focus = graph.note("Focus", nb, folder)
    graph.note("Peer", nb, folder)
    result = result_of(graph, focus, token_limit=10)
    assert result.focus_note.sample_siblings == () and result.related_notes == ()


@pytest.mark.parametrize(("limit", "with_peers"), [(99, False), (100, True)])
def test_folder_peers_need_a_remainder_of_at_least_100(limit: int, with_peers: bool) -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb, content=None)  # costs nothing: the remainder is the limit
    graph.note("Peer", nb)
    result = result_of(graph, focus, token_limit=limit)
    assert bool(result.focus_note.sample_siblings) == with_peers
    assert titles(result) == (["Peer"] if with_peers else [])


def test_folder_peers_come_after_wiki_notes_and_are_not_expanded() -> None:
    graph, nb = one_notebook()
    here, there = graph.folder(nb, "Here"), graph.folder(nb, "There")
    focus = graph.note("Focus", nb, here)
    target = graph.note("LinkT", nb, there)
    peer = graph.note("Peer", nb, here)
    graph.link(focus, target)
    graph.link(peer, graph.note("DeepOnly", nb, there))
    result = result_of(graph, focus)
    assert [(n.title, len(n.retrieval_path) - n.depth) for n in result.related_notes] == [
        ("LinkT", 1),
        ("Peer", 0),
        ("DeepOnly", 0),  # a peer of the depth-1 note LinkT, not reached through Peer
    ]
    assert by_title(result, "DeepOnly").retrieval_path == ("[[Focus]]", "[[NB: LinkT]]")
    assert by_title(result, "DeepOnly").depth == 2


def test_a_peer_too_big_for_what_remains_is_skipped_and_a_cheaper_one_enters() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb, content="")
    big = graph.note("Big", nb, content="b" * 150)  # 40 tokens
    small = graph.note("Small", nb, content="s" * 30)  # 8 tokens
    result = result_of(graph, focus, token_limit=120)  # R = 120: wiki 90, siblings 30
    assert [n.title for n in peer_notes(result)] == ["Small"]
    assert big < small and "Big" not in titles(result)


def test_peers_already_offered_use_up_a_later_anchors_cap() -> None:
    graph, nb = one_notebook()
    folder = graph.folder(nb, "Shared")
    focus = graph.note("Focus", nb)
    hubs = [graph.note(f"Hub{i}", nb, folder) for i in range(2)]
    for i in range(3):
        graph.note(f"P{i}", nb, folder)
    graph.link(focus, *hubs)
    result = result_of(graph, focus)
    # Both depth-1 hubs sample the same first two members; the second hub's offers are duplicates,
    # so P2 is never offered although the second hub could have named it.
    assert [(n.title, n.depth, n.retrieval_path[-1]) for n in peer_notes(result)] == [
        ("P0", 2, "[[NB: Hub0]]"),
        ("P1", 2, "[[NB: Hub0]]"),
    ]


# -- deleted notes and notes without a notebook ----------------------------------------------------
def test_deleted_targets_referrers_and_peers_never_appear() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb)
    dead_target, live_target = graph.note("DeadT", nb, deleted=True), graph.note("LiveT", nb)
    dead_ref, live_ref = graph.note("DeadR", nb, deleted=True), graph.note("LiveR", nb)
    graph.note("DeadPeer", nb, deleted=True)
    graph.link(focus, dead_target, live_target)
    graph.link(dead_ref, focus)
    graph.link(live_ref, focus)
    document = result_json(result_of(graph, focus)).decode()
    assert "Dead" not in document
    assert all(name in document for name in ("LiveT", "LiveR"))


def test_a_target_without_a_notebook_is_listed_but_cannot_be_related() -> None:
    graph, nb = one_notebook()
    focus = graph.note("Focus", nb)
    graph.link(focus, graph.note("Loose", None))
    result = result_of(graph, focus)
    assert result.focus_note.outgoing_links == ("[[Loose]]",)
    assert result.related_notes == ()


# -- other viewers and notebooks -------------------------------------------------------------------
def two_notebooks() -> tuple[WikiGraph, int, int]:
    graph = WikiGraph()
    return graph, graph.notebook("Mine", user=OWNER), graph.notebook("Theirs", user=OTHER)


def test_a_link_into_a_notebook_the_viewer_cannot_read_is_dropped() -> None:
    graph, mine, theirs = two_notebooks()
    focus = graph.note("Focus", mine)
    graph.link(focus, graph.note("Private", theirs))
    assert result_of(graph, focus).focus_note.outgoing_links == ()
    graph.bazaar.add(theirs)
    assert result_of(graph, focus).focus_note.outgoing_links == ("[[Theirs: Private]]",)


@pytest.mark.parametrize("how", ["subscription", "circle", "bazaar"])
def test_readable_notebooks_give_outgoing_targets(how: str) -> None:
    graph = WikiGraph()
    graph.circles[5] = {OWNER}
    mine = graph.notebook("Mine", user=OWNER)
    theirs = (
        graph.notebook("Theirs", circle=5) if how == "circle" else graph.notebook("Theirs", user=OTHER)
    )
    if how == "subscription":
        graph.subscriptions.add((OWNER, theirs))
    if how == "bazaar":
        graph.bazaar.add(theirs)
    focus = graph.note("Focus", mine)
    graph.link(focus, graph.note("There", theirs))
    assert titles(result_of(graph, focus, token_limit=99)) == ["There"]


@pytest.mark.parametrize(
    ("how", "visible"), [("owner", True), ("subscription", True), ("circle", False), ("bazaar", False)]
)
def test_referrers_in_other_notebooks_follow_the_sql_visibility(how: str, visible: bool) -> None:
    graph = WikiGraph()
    graph.circles[5] = {OWNER}
    mine = graph.notebook("Mine", user=OWNER)
    owner = {"owner": {"user": OWNER}, "circle": {"circle": 5}}.get(how, {"user": OTHER})
    theirs = graph.notebook("Theirs", **owner)
    if how == "subscription":
        graph.subscriptions.add((OWNER, theirs))
    if how == "bazaar":
        graph.bazaar.add(theirs)
    focus = graph.note("Focus", mine)
    graph.link(graph.note("Ref", theirs), focus)
    expected = ("[[Theirs: Ref]]",) if visible else ()
    assert result_of(graph, focus).focus_note.inbound_references == expected


def test_a_subscriber_sees_the_owners_notebook_but_not_the_owners_private_one() -> None:
    graph = WikiGraph()
    shared, private = graph.notebook("Shared", user=OWNER), graph.notebook("Private", user=OWNER)
    graph.subscriptions.add((OTHER, shared))
    focus = graph.note("Focus", shared)
    graph.link(focus, graph.note("Secret", private), graph.note("Open", shared))
    graph.link(graph.note("SecretRef", private), focus)
    as_owner = result_of(graph, focus)
    as_subscriber = result_of(graph, focus, viewer=Viewer(user_id=OTHER))
    assert as_owner.focus_note.outgoing_links == ("[[Private: Secret]]", "[[Shared: Open]]")
    assert as_owner.focus_note.inbound_references == ("[[Private: SecretRef]]",)
    assert as_subscriber.focus_note.outgoing_links == ("[[Shared: Open]]",)
    assert as_subscriber.focus_note.inbound_references == ()


def test_a_circle_notebook_is_seen_by_its_circle_by_default() -> None:
    graph = WikiGraph()
    graph.circles[5] = {OWNER}
    team, mine = graph.notebook("Team", circle=5), graph.notebook("Mine", user=OWNER)
    focus = graph.note("Focus", team)
    graph.link(focus, graph.note("InTeam", team), graph.note("InMine", mine))
    as_circle = result_of(graph, focus)  # the owner view: a member owning nothing else
    assert as_circle == result_of(graph, focus, viewer=Viewer(circle_id=5))
    assert as_circle.focus_note.outgoing_links == ("[[Team: InTeam]]",)
    as_member = result_of(graph, focus, viewer=Viewer(user_id=OWNER))
    assert as_member.focus_note.outgoing_links == ("[[Team: InTeam]]", "[[Mine: InMine]]")


def test_a_viewer_who_may_not_read_the_focus_is_refused_in_one_line() -> None:
    graph, mine, _ = two_notebooks()
    focus = graph.note("Focus", mine)
    with pytest.raises(NoteNotReadable, match=f"^viewer {OTHER} may not read note {focus}$"):
        result_of(graph, focus, viewer=Viewer(user_id=OTHER))
