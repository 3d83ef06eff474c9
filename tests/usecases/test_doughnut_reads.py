"""Doughnut's own read (service.doughnut_api) at the cost of a hit: no query, no trace inflated.

The owner's read of a stored note asks nothing of the database (the note's row is known from the
snapshot the reader serves) and decides whose view the snapshot holds from its header, without
inflating the trace; a tokenLimit up to the trace's own limit (20,000 for focus-context, above the
configured maximum) is replayed from the snapshot. Refusals keep Doughnut's order: a missing note
is ``no-note`` before a bad or missing ``tokenLimit``, and a deleted note is still answered.
"""

from __future__ import annotations

import contextlib

import pytest

from graphrag import CharsCounter, Request, StrategyParams, get_strategy
from graphrag.wiki.model import Viewer
from service.answers import trace_viewer
from service.context import ContextService
from service.decoding import decode_envelope
from service.doughnut_api import DoughnutRead, Refusal, answer, cached_answer
from service.envelope import SnapshotKey
from service.ports import TokenOwner
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import rebuild
from service.sessions import Viewers
from service.users import TokenBook
from storage.memory import MemoryCoordination, MemoryState
from storage.memory_cache import MemoryCache
from storage.memory_wiki import MemoryWiki
from tests.wiki_support import H

STRATEGY, MAX_LIMIT, NOW_MS = "focus-context", 3_000, 1_790_000_000_000
TOKENS = {"owner-token": 1, "other-token": 2}


class Site:
    """Two users' notebooks, a focus linking to a note, its snapshots rebuilt."""

    def __init__(self) -> None:
        self.db = db = MemoryWiki()
        own = db.notebook("Own", user=1)
        db.notebook("Theirs", user=2)
        self.focus = db.note("Focus", own, None, H + "focus " * 400)
        self.linked = db.note("Linked", own, None, H + "linked " * 300)
        self.gone = db.note("Gone", own, None, H + "gone", deleted=True)
        db.link(self.focus, self.linked)
        self.state = MemoryState(clock_ms=lambda: NOW_MS)
        self.cache = MemoryCache(self.state)
        self.service = ContextService(db, CharsCounter(), StrategyParams())
        report = rebuild(self.service, self.cache, db.live_ids_after(0, 100), strategies=(STRATEGY,),
                         seeds=(), max_token_limit=MAX_LIMIT, now_ms=NOW_MS)
        assert report.errors == {}
        config = ReaderConfig(strategies=(STRATEGY,), seeds=(), max_token_limit=MAX_LIMIT)
        self.reader = SnapshotReader(self.service, self.cache, MemoryCoordination(self.state),
                                     config, clock_ms=lambda: NOW_MS + 1_000)
        book = TokenBook(lambda t: TokenOwner(TOKENS[t], None) if t in TOKENS else None,
                         ttl_ms=60_000, clock_ms=lambda: 0, wall_ms=lambda: NOW_MS)
        self.viewers = Viewers(book)

    def read(self, note: object, limit: object, token: str | None = "owner-token") -> bytes:
        request = DoughnutRead(str(note), None if limit is None else str(limit), token, "json")
        return answer(self.reader, self.viewers, request).body

    def live(self, note: int, limit: int, user: int) -> bytes:
        request = Request(note, None, limit, 0, limit, viewer=Viewer(user_id=user),
                          read_deleted=True)
        return self.service.compute(request, STRATEGY).to_json()


@pytest.fixture
def site() -> Site:
    return Site()


def test_the_owners_read_asks_the_database_nothing(site: Site) -> None:
    for limit in (2000, 0, 700, MAX_LIMIT, 12_345, 20_000):
        asked = len(site.db.asked)
        body = site.read(site.focus, limit)
        assert len(site.db.asked) == asked, limit  # no query: not the row, not the access
        assert body == site.live(site.focus, limit, 1), limit


def test_a_snapshot_says_whose_view_it_holds_without_its_trace(site: Site) -> None:
    envelope = decode_envelope(site.cache.read(SnapshotKey(site.focus, STRATEGY, None)))
    assert envelope is not None and envelope.viewer == Viewer(user_id=1)
    assert trace_viewer(envelope) == Viewer(user_id=1)
    assert "trace_bytes" not in envelope.__dict__  # (a cached_property: never inflated)


def test_a_trace_answers_up_to_its_own_limit_above_the_configured_maximum(site: Site) -> None:
    top = get_strategy(STRATEGY).stored_limit(MAX_LIMIT)
    assert top == 20_000
    envelope = decode_envelope(site.cache.read(SnapshotKey(site.focus, STRATEGY, None)))
    assert envelope is not None and envelope.max_token_limit == top
    served = site.reader.get(site.focus, token_limit=top, viewer=Viewer(user_id=1), doughnut=True)
    assert served.source == "cache"
    beyond = site.reader.get(site.focus, token_limit=top + 1, viewer=Viewer(user_id=1),
                             doughnut=True)
    assert beyond.source == "live" and beyond.body == site.live(site.focus, top + 1, 1)


@pytest.mark.parametrize(("note", "limit", "kind"), [
    ("999", "2000", "no-note"), ("999", None, "no-note"), ("999", "x", "no-note"),
    ("0", "2000", "no-note"), ("-3", "2000", "no-note"), ("abc", "2000", "bad-note"),
    ("FOCUS", None, "no-limit"), ("FOCUS", "12a", "bad-limit")])
def test_refusals_keep_doughnuts_order(site: Site, note: str, limit: str | None, kind: str) -> None:
    with pytest.raises(Refusal) as refused:
        site.read(note.replace("FOCUS", str(site.focus)), limit)
    assert refused.value.kind == kind


def test_a_stranger_is_refused_and_a_deleted_note_still_answered(site: Site) -> None:
    with pytest.raises(Refusal) as refused:
        site.read(site.focus, 2000, "other-token")
    assert refused.value.kind == "forbidden"
    with pytest.raises(Refusal) as refused:
        site.read(site.focus, 2000, None)
    assert refused.value.kind == "not-logged-in"
    assert site.read(site.gone, 2000) == site.live(site.gone, 2000, 1)


def test_the_hot_answer_is_the_answer_once_the_token_is_remembered(site: Site) -> None:
    request = DoughnutRead(str(site.focus), "900", "owner-token", "json")
    assert cached_answer(site.reader, site.viewers, request) is None  # not remembered yet
    answered = answer(site.reader, site.viewers, request)
    asked = len(site.db.asked)
    hot = cached_answer(site.reader, site.viewers, request)
    assert hot is not None and (hot.body, hot.source) == (answered.body, "cache")
    assert len(site.db.asked) == asked
    for other in (DoughnutRead(str(site.focus), "900", "other-token", "json"),  # a stranger
                  DoughnutRead(str(site.focus), "900", None, "json"),  # nobody
                  DoughnutRead(str(site.focus), None, "owner-token", "json"),  # no tokenLimit
                  DoughnutRead("999", "900", "owner-token", "json")):  # no snapshot
        with contextlib.suppress(Refusal):
            answer(site.reader, site.viewers, other)  # (remembers the token)
        assert cached_answer(site.reader, site.viewers, other) is None, other


def test_a_remembered_token_is_known_until_it_is_forgotten_or_expires() -> None:
    now, wall = [0], [NOW_MS]
    owners = {"a": TokenOwner(1, None), "b": TokenOwner(2, NOW_MS + 10)}
    book = TokenBook(owners.get, ttl_ms=100, clock_ms=lambda: now[0], wall_ms=lambda: wall[0])
    assert book.known("a") is None
    assert book.viewer_of("a") == book.known("a") == Viewer(user_id=1)
    assert book.viewer_of("b") == book.known("b") == Viewer(user_id=2)
    assert book.viewer_of("c") == book.known("c") == Viewer()  # unknown: nobody
    wall[0] += 10
    assert book.known("b") == Viewer()  # expired
    now[0] += 100
    assert book.known("a") is None  # forgotten: looked up again by viewer_of
    assert Viewers(book).known("a", None) is None
    book.viewer_of("a")
    assert Viewers(book).known("a", "session=1") == Viewer(user_id=1)
    assert Viewers(book).known("c", None) is None  # nobody is not decided without the session
