"""The same suite against SQLite and MariaDB: the database path gives exactly the in-memory bytes."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL

import graphrag
from graphrag import CharsCounter, NoteNotFound, Outcome, Request, StrategyParams
from service.context import ContextService
from storage.database import open_engine
from storage.profiles.admin_2025 import create_tables, insert_notes
from storage.profiles.doughnut_2025 import Doughnut2025 as NoteStore
from storage.records import TreeNote
from tests.conftest import url_string
from tests.storage.graphs import (
    CHAIN,
    CYCLIC,
    DANGLING,
    DELETED,
    LONG_EMOJI_DETAILS,
    RTL_DETAILS,
    SIBLING_PARENT,
    SIBLINGS_IN_ORDER,
    UNICODE_TITLES,
    all_uris,
    hand_graph,
    live_ids,
    load_graph,
    parse,
)
from tests.support import NOW_MS, Graph, compute

STRATEGIES = ("wavefront", "layered")
SEEDS = (0, 1, 20260101)


def service(store: NoteStore) -> ContextService:
    return ContextService(store, CharsCounter(), StrategyParams())


@pytest.fixture
def graph() -> Graph:
    return hand_graph()


@pytest.fixture
def loaded(store: NoteStore, graph: Graph) -> ContextService:
    load_graph(store, graph)
    return service(store)


def finishes(fn: Callable[[], Any], seconds: float = 30.0) -> Any:
    """Run ``fn`` in a daemon thread; fail (instead of hanging the run) if it does not finish."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # re-raised below
            box["error"] = err

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"did not terminate within {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


# -- byte identity with the in-memory computation ---------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("seed", SEEDS)
def test_batch_gives_the_in_memory_bytes_for_every_live_note(
    loaded: ContextService, graph: Graph, strategy: str, seed: int
) -> None:
    requests = [Request(i, seed, 5000, NOW_MS) for i in live_ids(graph)]
    computed = finishes(lambda: loaded.compute_many(requests, strategy))
    assert set(computed.results) == set(requests)
    for req in requests:
        got = computed.results[req]
        assert isinstance(got, Outcome), (req, got)
        want = compute(graph, req.focus_id, strategy, seed=seed).to_json()
        assert got.to_json() == want, f"focus {req.focus_id}"


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    ("token_limit", "traversal"), [(0, None), (40, None), (250, None), (400, 5000), (1_000_000, None)]
)
def test_single_compute_gives_the_in_memory_bytes_at_other_budgets(
    loaded: ContextService, graph: Graph, strategy: str, token_limit: int, traversal: int | None
) -> None:
    for focus in (1, 2, 10, 11, 20, 42, 60, 301, CHAIN[-1]):
        req = Request(focus, 7, token_limit, NOW_MS, traversal)
        got = loaded.compute(req, strategy).to_json()
        want = compute(
            graph, focus, strategy, seed=7, token_limit=token_limit, traversal_token_limit=traversal
        ).to_json()
        assert got == want, f"focus {focus}"
        parse(got)


def test_the_service_finds_real_context(loaded: ContextService) -> None:
    """Guard against a vacuous identity (e.g. both sides empty): Cat has a rich context."""
    result = parse(loaded.compute(Request(10, 0, 5000, NOW_MS), "layered").to_json())
    focus = result["focusNote"]
    assert focus["uri"] == "/n10"
    assert focus["title"] == "Cat"
    assert focus["contextualPath"] == ["/n1", "/n2"]
    assert set(focus["children"]) >= {"/n30", "/n40"}
    assert set(focus["inboundReferences"]) == {"/n41", "/n43", "/n44", "/n66"}
    related = {n["uri"]: n for n in result["relatedNotes"]}
    assert related["/n2"]["relationToFocusNote"] == "Parent"
    link = related["/n40"]
    assert link["subjectUriAndTitle"] == {"uri": "/n10", "title": "Cat"}
    assert link["predicate"] == ":eats"
    assert link["objectUriAndTitle"] == {"uri": "/n20", "title": "note 20"}
    assert "title" not in link


# -- deleted and unknown notes ----------------------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_deleted_notes_never_appear(loaded: ContextService, graph: Graph, strategy: str) -> None:
    deleted_uris = {f"/n{i}" for i in DELETED}
    requests = [Request(i, 3, 1_000_000, NOW_MS) for i in live_ids(graph)]
    computed = loaded.compute_many(requests, strategy)
    for req, got in computed.results.items():
        assert isinstance(got, Outcome)
        uris = set(all_uris(parse(got.to_json())))
        assert not uris & deleted_uris, f"focus {req.focus_id} shows {uris & deleted_uris}"


def test_live_notes_around_deleted_ones(loaded: ContextService) -> None:
    # a live link whose target is deleted keeps its subject and loses its object
    link = parse(loaded.compute(Request(54, 0, 5000, NOW_MS), "wavefront").to_json())["focusNote"]
    assert link["subjectUriAndTitle"]["uri"] == "/n14"
    assert "objectUriAndTitle" not in link
    # a live note under a deleted parent has no parent and an empty contextual path
    orphan = parse(loaded.compute(Request(55, 0, 5000, NOW_MS), "layered").to_json())["focusNote"]
    assert "parentUriAndTitle" not in orphan
    assert orphan["contextualPath"] == []
    # the deleted inbound reference 53 is not an inbound reference of Cat
    cat = parse(loaded.compute(Request(10, 0, 1_000_000, NOW_MS), "layered").to_json())
    assert "/n53" not in cat["focusNote"]["inboundReferences"]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("focus", [424242, 0, 9999, *sorted(DELETED)])
def test_unknown_or_deleted_focus_is_not_found(
    loaded: ContextService, strategy: str, focus: int
) -> None:
    with pytest.raises(NoteNotFound) as info:
        loaded.compute(Request(focus, 0, 5000, NOW_MS), strategy)
    assert info.value.note_id == focus


def test_not_found_is_per_note_in_a_batch(loaded: ContextService) -> None:
    good, unknown, deleted = (Request(i, 0, 5000, NOW_MS) for i in (10, 424242, 50))
    results = loaded.compute_many([good, unknown, deleted], "wavefront").results
    assert isinstance(results[good], Outcome)
    assert isinstance(results[unknown], NoteNotFound)
    assert isinstance(results[deleted], NoteNotFound)


def test_empty_table_gives_not_found(store: NoteStore) -> None:
    with pytest.raises(NoteNotFound):
        service(store).compute(Request(1, 0, 5000, NOW_MS), "wavefront")


# -- dangling ids, cycles and long chains -----------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_dangling_ids_and_cycles_terminate_with_valid_json(
    loaded: ContextService, graph: Graph, strategy: str
) -> None:
    focuses = (*DANGLING, *CYCLIC, 60)
    requests = [Request(i, 0, 1_000_000, NOW_MS) for i in focuses]
    computed = finishes(lambda: loaded.compute_many(requests, strategy))
    for req in requests:
        got = computed.results[req]
        assert isinstance(got, Outcome), (req, got)
        focus = parse(got.to_json())["focusNote"]
        assert focus["uri"] == f"/n{req.focus_id}"
        assert got.to_json() == compute(graph, req.focus_id, strategy, token_limit=1_000_000).to_json()
    by_id = {r.focus_id: parse(computed.results[r].to_json())["focusNote"] for r in requests}
    assert by_id[70]["contextualPath"] == []  # parent 9999 does not exist
    assert "parentUriAndTitle" not in by_id[70]
    assert by_id[72]["contextualPath"] == ["/n70"]
    assert "objectUriAndTitle" not in by_id[71]  # target 8888 does not exist
    assert by_id[80]["contextualPath"] == ["/n81"]
    assert by_id[81]["contextualPath"] == ["/n80"]
    assert by_id[82]["contextualPath"] == ["/n81", "/n80"]
    assert by_id[83]["contextualPath"] == []
    assert by_id[84]["objectUriAndTitle"] == {"uri": "/n84", "title": ":its own target"}


def test_long_ancestor_chain_is_followed_to_the_root(loaded: ContextService) -> None:
    deepest = CHAIN[-1]
    focus = parse(loaded.compute(Request(deepest, 0, 5000, NOW_MS), "wavefront").to_json())
    assert focus["focusNote"]["contextualPath"] == [f"/n{i}" for i in CHAIN[:-1]]


# -- text and time ----------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_unicode_round_trips(loaded: ContextService, strategy: str) -> None:
    for note_id, title in UNICODE_TITLES.items():
        focus = parse(loaded.compute(Request(note_id, 0, 5000, NOW_MS), strategy).to_json())
        assert focus["focusNote"]["title"] == title
        assert focus["focusNote"]["parentUriAndTitle"] == {"uri": "/n2", "title": "Animals"}
    root = parse(loaded.compute(Request(1, 0, 5000, NOW_MS), strategy).to_json())["focusNote"]
    assert root["title"] == "Doughnut 🍩 notebook"
    rtl = parse(loaded.compute(Request(14, 0, 5000, NOW_MS), strategy).to_json())["focusNote"]
    assert rtl["details"] == RTL_DETAILS
    dog = parse(loaded.compute(Request(11, 0, 5000, NOW_MS), strategy).to_json())["focusNote"]
    assert dog["details"] == LONG_EMOJI_DETAILS  # the focus's details are never cut


def test_related_details_cut_on_a_character_boundary(loaded: ContextService) -> None:
    result = parse(loaded.compute(Request(2, 0, 1_000_000, NOW_MS), "layered").to_json())
    dog = next(n for n in result["relatedNotes"] if n["uri"] == "/n11")
    assert dog["detailsTruncated"] is True
    cut = dog["details"].removesuffix("...")
    assert LONG_EMOJI_DETAILS.startswith(cut)
    assert len(cut.encode()) <= 150 < len(cut.encode()) + len("😀".encode())
    exact = next(n for n in result["relatedNotes"] if n["uri"] == "/n13")
    assert exact["details"] == "y" * 150 and "detailsTruncated" not in exact


def test_created_at_reads_as_utc(store: NoteStore) -> None:
    insert_notes(store.engine, [
        TreeNote(id=7, title="dated", created_at=dt.datetime(2025, 12, 3, 10, 15, 17)),
        TreeNote(id=8, title="leap", parent_id=7, created_at=dt.datetime(2024, 2, 29, 23, 59, 59)),
    ])
    result = parse(service(store).compute(Request(7, 0, 5000, NOW_MS), "layered").to_json())
    assert result["focusNote"]["createdAt"] == "2025-12-03T10:15:17.000+00:00"
    assert [n["createdAt"] for n in result["relatedNotes"]] == ["2024-02-29T23:59:59.000+00:00"]


@pytest.mark.mariadb
def test_mariadb_timestamp_reads_as_utc_whatever_the_session_zone(mariadb_url: URL) -> None:
    """A TIMESTAMP is stored in UTC and shown in the session's zone: the service must read UTC
    even when the connection starts in another zone (as on a server whose default is not UTC)."""
    writer = create_engine(url_string(mariadb_url))
    try:
        create_tables(writer)
        with writer.begin() as conn:
            conn.execute(text("SET time_zone = '+09:00'"))
            conn.execute(
                text(
                    "INSERT INTO note (id, sibling_order, topic_constructor, created_at) "
                    "VALUES (1, 1, 'tokyo', '2025-12-03 19:15:17')"  # = 10:15:17 UTC
                )
            )
    finally:
        writer.dispose()
    elsewhere = url_string(mariadb_url) + "?init_command=" + quote("SET time_zone='+05:00'")
    probe = create_engine(elsewhere)
    try:
        with probe.connect() as conn:  # the connection really starts at +05:00 ...
            assert conn.execute(text("SELECT @@session.time_zone")).scalar() == "+05:00"
    finally:
        probe.dispose()
    engine = open_engine(elsewhere)
    try:
        with engine.connect() as conn:  # ... and open_engine's sessions are switched to UTC
            assert conn.execute(text("SELECT @@session.time_zone")).scalar() == "+00:00"
        outcome = service(NoteStore(engine)).compute(Request(1, 0, 5000, NOW_MS), "wavefront")
        assert parse(outcome.to_json())["focusNote"]["createdAt"] == "2025-12-03T10:15:17.000+00:00"
    finally:
        engine.dispose()


# -- sibling order ----------------------------------------------------------------------------------
def test_children_in_sibling_order_then_id(loaded: ContextService, graph: Graph) -> None:
    result = loaded.compute(Request(SIBLING_PARENT, 0, 1_000_000, NOW_MS), "layered")
    assert result.to_json() == compute(graph, SIBLING_PARENT, "layered", token_limit=1_000_000).to_json()
    focus = parse(result.to_json())["focusNote"]
    assert focus["children"] == [f"/n{i}" for i in SIBLINGS_IN_ORDER]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_prior_and_younger_siblings_in_sibling_order(
    loaded: ContextService, graph: Graph, strategy: str
) -> None:
    order = list(SIBLINGS_IN_ORDER)
    for focus_id in SIBLINGS_IN_ORDER:
        result = loaded.compute(Request(focus_id, 0, 1_000_000, NOW_MS), strategy)
        want = compute(graph, focus_id, strategy, token_limit=1_000_000).to_json()
        assert result.to_json() == want
        focus = parse(result.to_json())["focusNote"]
        at = order.index(focus_id)
        prior = [int(u[2:]) for u in focus["priorSiblings"]]
        younger = [int(u[2:]) for u in focus["youngerSiblings"]]
        assert prior == [i for i in order[:at] if i in prior]
        assert younger == [i for i in order[at + 1 :] if i in younger]
        if strategy == "layered":  # the layered walk reaches every sibling with this budget
            assert prior == order[:at]
            assert younger == order[at + 1 :]


def test_the_error_family(loaded: ContextService) -> None:
    with pytest.raises(graphrag.GraphRagError):
        loaded.compute(Request(424242, 0, 5000, NOW_MS), "wavefront")
    with pytest.raises(graphrag.InvalidParameter):
        loaded.compute(Request(10, 0, 5000, NOW_MS), "no-such-strategy")
