"""A reader keeps the traces it parsed and the answers it replayed (service.reader.traces): a
replay of a snapshot read again answers the same bytes without inflating or parsing its trace, the
same read again without replaying at all, and a rebuilt snapshot is parsed and replayed anew."""

from __future__ import annotations

import dataclasses

import pytest

from graphrag import CharsCounter, Request, StrategyParams
from graphrag.wiki.focus import trace as traces
from service import answers
from service.answers import Answer, Ask
from service.context import ContextService
from service.envelope import Envelope
from service.reader import ReaderConfig, SnapshotReader
from service.reader.traces import KeptAnswers
from service.rebuild import rebuild
from storage.memory import MemoryCoordination, MemoryState
from storage.memory_cache import MemoryCache
from storage.memory_wiki import MemoryWiki
from tests.wiki_support import H

STRATEGY, NOW_MS = "focus-context", 1_790_000_000_000


class Site:
    def __init__(self, kept: int, answers_bytes: int = 0) -> None:
        self.db = db = MemoryWiki()
        book = db.notebook("Own", user=1)
        self.focus = db.note("Focus", book, None, H + "focus")
        for k in range(6):
            db.link(self.focus, db.note(f"Linked {k}", book, None, H + "linked " * (k + 1)))
        self.now = [NOW_MS]
        self.state = MemoryState(clock_ms=lambda: self.now[0])
        self.cache = MemoryCache(self.state)
        self.service = ContextService(db, CharsCounter(), StrategyParams())
        self.rebuild()
        config = ReaderConfig(strategies=(STRATEGY,), seeds=(), max_token_limit=3000,
                              parsed_traces=kept, kept_answers_bytes=answers_bytes)
        self.reader = SnapshotReader(self.service, self.cache, MemoryCoordination(self.state),
                                     config, clock_ms=lambda: self.now[0] + 1)

    def rebuild(self) -> None:
        assert rebuild(self.service, self.cache, [self.focus], strategies=(STRATEGY,), seeds=(),
                       max_token_limit=3000, now_ms=self.now[0]).errors == {}

    def live(self, limit: int) -> bytes:
        request = Request(self.focus, None, limit, 0, limit)
        return self.service.compute(request, STRATEGY).to_json()


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    count: list[int] = []
    replay = answers._replayed

    def counted(envelope: Envelope, ask: Ask) -> Answer:
        count.append(1)
        return replay(envelope, ask)

    monkeypatch.setattr(answers, "_replayed", counted)
    return count


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    count: list[int] = []
    parse = traces.Trace.from_bytes

    def counted(data: bytes) -> traces.Trace:
        count.append(1)
        return parse(data)

    monkeypatch.setattr(traces.Trace, "from_bytes", staticmethod(counted))
    return count


def test_a_snapshot_read_again_is_replayed_from_the_trace_parsed_before(parses: list[int]) -> None:
    site = Site(kept=8)
    wants = {limit: site.live(limit) for limit in (1, 40, 90, 700)}
    assert {limit: site.reader.get(site.focus, token_limit=limit).body for limit in wants} == wants
    assert len(parses) == 1  # the first replay parsed it; the others took what it parsed
    linked = site.db.notes[site.focus + 1]
    site.db.notes[linked.id] = dataclasses.replace(linked, content=H + "edited")
    site.now[0] += 1_000
    site.rebuild()  # another time of computation: another trace
    assert site.reader.get(site.focus, token_limit=90).body == site.live(90)
    assert len(parses) == 2


def test_keeping_none_parses_every_replay(parses: list[int]) -> None:
    site = Site(kept=0)
    for limit in (40, 90, 40):
        assert site.reader.get(site.focus, token_limit=limit).body == site.live(limit)
    assert len(parses) == 3


def test_the_same_read_again_is_answered_as_replayed_before(parses: list[int],
                                                            replays: list[int]) -> None:
    site = Site(kept=0, answers_bytes=1 << 20)
    wants = {(limit, fmt): site.reader.get(site.focus, token_limit=limit, fmt=fmt).body
             for limit in (40, 90) for fmt in ("json", "markdown")}
    assert wants[(40, "json")] == site.live(40) and len(replays) == 4
    again = {key: site.reader.get(site.focus, token_limit=key[0], fmt=key[1]).body for key in wants}
    assert again == wants
    assert len(replays) == 4 and len(parses) == 4  # nothing inflated, parsed or cut again
    site.now[0] += 1_000
    linked = site.db.notes[site.focus + 1]
    site.db.notes[linked.id] = dataclasses.replace(linked, content=H + "edited again")
    site.rebuild()  # another time of computation: nothing kept answers it
    assert site.reader.get(site.focus, token_limit=90).body == site.live(90) != wants[(90, "json")]
    assert len(replays) == 5


def test_kept_answers_stay_within_their_budget() -> None:
    kept = KeptAnswers(budget_bytes=1_600)
    for k in range(40):
        kept.put(k, f"answer {k}", 60)
    assert kept.kept_bytes <= 1_600
    assert kept.get(39) == "answer 39" and kept.get(0) is None  # the least recently used went
    kept.put("large", "x", 101)  # more than a sixteenth of the budget: not kept
    assert kept.get("large") is None
    kept.put(39, "answer 39 again", 60)  # replaced, counted once
    assert kept.get(39) == "answer 39 again" and kept.kept_bytes <= 1_600


def test_limits_that_show_the_whole_trace_share_one_answer(replays: list[int]) -> None:
    """From a trace's full limit on (graphrag.wiki.focus.cut.full_limit) every limit gives one
    answer: the stored result when the stored limit is among them, else one replay kept for all."""
    small = Site(kept=8, answers_bytes=1 << 20)  # all it links to fits in the focus cap's budget
    for limit in (1_500, 2_100, 3_000):
        assert small.reader.get(small.focus, token_limit=limit).body == small.live(limit)
    assert replays == []  # the stored result (tokenLimit 2000) answered them all
    assert small.reader.get(small.focus, token_limit=1_499).body == small.live(1_499)
    assert len(replays) == 1
    large = Site(kept=8, answers_bytes=1 << 20)
    book = large.db.notes[large.focus].notebook_id
    for k in range(10):
        large.db.link(large.focus, large.db.note(f"Long {k}", book, None, H + "word " * 150))
    large.now[0] += 1_000
    large.rebuild()  # its full limit (2,505) is past the stored 2,000
    replays.clear()
    wants = {limit: large.live(limit) for limit in (2_000, 2_600, 2_800, 3_000)}
    assert {limit: large.reader.get(large.focus, token_limit=limit).body for limit in wants} == wants
    assert wants[2_600] == wants[3_000] != wants[2_000]
    assert len(replays) == 1  # 2,600 replayed; 2,800 and 3,000 took its answer
