"""A reader keeps the traces it parsed (service.reader.traces): a replay of a snapshot read again
answers the same bytes without inflating or parsing its trace, and a rebuilt snapshot is parsed
anew."""

from __future__ import annotations

import dataclasses

import pytest

from graphrag import CharsCounter, Request, StrategyParams
from graphrag.wiki.focus import trace as traces
from service.context import ContextService
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import rebuild
from storage.memory import MemoryCoordination, MemoryState
from storage.memory_cache import MemoryCache
from storage.memory_wiki import MemoryWiki
from tests.wiki_support import H

STRATEGY, NOW_MS = "focus-context", 1_790_000_000_000


class Site:
    def __init__(self, kept: int) -> None:
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
                              parsed_traces=kept)
        self.reader = SnapshotReader(self.service, self.cache, MemoryCoordination(self.state),
                                     config, clock_ms=lambda: self.now[0] + 1)

    def rebuild(self) -> None:
        assert rebuild(self.service, self.cache, [self.focus], strategies=(STRATEGY,), seeds=(),
                       max_token_limit=3000, now_ms=self.now[0]).errors == {}

    def live(self, limit: int) -> bytes:
        request = Request(self.focus, None, limit, 0, limit)
        return self.service.compute(request, STRATEGY).to_json()


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
