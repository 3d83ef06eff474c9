"""A reader keeps the values it decoded, by their bytes (service.reader.decoded): a hit read again is
not decoded again, yet every read still reads the stored value and its generation first, so an
edit's outdating, a rebuild and another database are seen at once."""

from __future__ import annotations

import dataclasses

import pytest

from graphrag import CharsCounter, Request, StrategyParams
from service.context import ContextService
from service.decoding import decode_envelope
from service.envelope import Envelope, SnapshotKey
from service.reader import ReaderConfig, SnapshotReader
from service.reader import decoded as decoded_module
from service.reader.decoded import DecodedValues
from service.rebuild import rebuild
from storage.memory import MemoryCoordination, MemoryState
from storage.memory_cache import MemoryCache
from storage.memory_wiki import MemoryWiki
from tests.wiki_support import H

STRATEGY, NOW_MS, LIMIT = "focus-context", 1_790_000_000_000, 3000


class Site:
    def __init__(self, budget_bytes: int = 1 << 20) -> None:
        self.db = db = MemoryWiki()
        book = db.notebook("Own", user=1)
        self.focus = db.note("Focus", book, None, H + "focus")
        self.linked = db.note("Linked", book, None, H + "linked")
        db.link(self.focus, self.linked)
        self.now = [NOW_MS]
        self.state = MemoryState(clock_ms=lambda: self.now[0])
        self.cache = MemoryCache(self.state)
        self.service = ContextService(db, CharsCounter(), StrategyParams())
        self.rebuild()
        config = ReaderConfig(strategies=(STRATEGY,), seeds=(), max_token_limit=LIMIT,
                              decoded_values_bytes=budget_bytes)
        self.reader = SnapshotReader(self.service, self.cache, MemoryCoordination(self.state),
                                     config, clock_ms=lambda: self.now[0] + 1)

    def rebuild(self) -> None:
        assert rebuild(self.service, self.cache, [self.focus], strategies=(STRATEGY,), seeds=(),
                       max_token_limit=LIMIT, now_ms=self.now[0]).errors == {}

    def live(self) -> bytes:
        return self.service.compute(Request(self.focus, None, LIMIT, 0, LIMIT), STRATEGY).to_json()

    def edit(self, content: str) -> None:
        linked = self.db.notes[self.linked]
        self.db.notes[self.linked] = dataclasses.replace(linked, content=H + content)


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    count: list[int] = []
    decode = decoded_module.decode_envelope

    def counted(data: bytes | str | None) -> object:
        count.append(1)
        return decode(data)

    monkeypatch.setattr(decoded_module, "decode_envelope", counted)
    return count


def test_a_hit_read_again_is_not_decoded_again(decodes: list[int]) -> None:
    site = Site()
    first = site.reader.get(site.focus)
    assert first.source == "cache" and first.body == site.live()
    for _ in range(5):
        again = site.reader.get(site.focus)
        assert (again.source, again.body) == ("cache", first.body)
        assert site.reader.cached(site.focus) is not None
    assert len(decodes) == 1


def test_an_outdated_or_rebuilt_value_is_never_answered_from_what_was_kept(decodes: list[int]) -> None:
    site = Site()
    before = site.reader.get(site.focus).body
    site.edit("edited")
    site.cache.bump_generations([site.focus])  # an event outdates it: the same bytes, read again
    assert site.reader.cached(site.focus) is None
    outdated = site.reader.get(site.focus)
    assert outdated.source == "live" and outdated.body == site.live() != before
    site.now[0] += 1_000
    site.rebuild()  # new bytes: decoded anew
    count = len(decodes)
    rebuilt = site.reader.get(site.focus)
    assert (rebuilt.source, rebuilt.body) == ("cache", site.live())
    assert len(decodes) > count


def test_what_one_read_derives_stays_with_it() -> None:
    """A read's replay parses the trace on its own copy: the kept envelope holds its fields alone,
    so parsed traces stay bounded by GRAPHRAG_PARSED_TRACES (0 here: none kept)."""
    site = Site()
    raw = _stored(site)
    kept = DecodedValues(budget_bytes=1 << 20)
    first = kept.decode(raw)
    assert first is not None and first.trace is not None and first.parsed_trace is not None
    again = kept.decode(raw)
    assert again is not None and again.parsed_trace is None and again == first
    held = kept._kept.get(raw)
    assert isinstance(held, Envelope) and held.parsed_trace is None


def test_keeping_none_decodes_every_read(decodes: list[int]) -> None:
    site = Site(budget_bytes=0)
    for _ in range(3):
        assert site.reader.get(site.focus).body == site.live()
    assert len(decodes) == 3


def _stored(site: Site) -> bytes:
    raw = site.cache.read(SnapshotKey(site.focus, STRATEGY, None))
    assert raw is not None
    return raw


def test_the_kept_values_stay_within_their_budget_and_only_valid_ones_are_kept() -> None:
    raw = _stored(Site())
    kept = DecodedValues(budget_bytes=40 * len(raw))
    variants = [raw[:-1] + b" " * k + raw[-1:] for k in range(30)]  # 30 equal values, other bytes
    for value in variants:
        envelope = kept.decode(value)
        assert envelope is not None and envelope == decode_envelope(value)
        assert kept.kept_bytes <= kept.budget_bytes
    assert kept.kept_bytes >= kept.budget_bytes - 4 * len(variants[-1])  # full, not emptied
    newest = kept.decode(variants[-1])
    assert newest == kept.decode(variants[-1]) and newest is not kept.decode(variants[-1])
    assert kept.decode(b"{not a snapshot") is None and kept.decode(None) is None
    assert kept._kept.get(b"{not a snapshot") is None
    small = DecodedValues(budget_bytes=len(raw))  # one value over a sixteenth: not kept
    small.decode(raw)
    assert small.kept_bytes == 0
