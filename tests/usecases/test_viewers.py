"""Another user's answer from the owner's snapshot (service.viewers): only when proven the same.

Property: for random 2026 graphs (two users, a circle, subscriptions, the bazaar, cross-notebook
links) and random viewers (either user, a third user, a circle, nobody), every answer the reader
serves from the snapshot after the proof equals a live compute for that viewer, byte for byte,
at several tokenLimits and in both formats; an answer not proven is computed live and never
written. Examples pin that the proof is used (a subscriber whose notebooks link nowhere near the
focus) and refused (the same subscriber once a note of theirs links to the focus).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphrag import CharsCounter, Request, StrategyParams
from graphrag.core.errors import Forbidden
from graphrag.wiki.model import Viewer
from service.context import ContextService
from service.envelope import SnapshotKey
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import rebuild
from service.viewers import same_view
from storage.memory import MemoryCoordination, MemoryState
from storage.memory_cache import MemoryCache
from storage.memory_wiki import MemoryWiki
from tests.storage.wiki_rows import random_graph
from tests.wiki_support import H

STRATEGY, MAX_LIMIT, NOW_MS = "focus-context", 3_000, 1_790_000_000_000
LIMITS = (0, 1, 60, 500, 2000, MAX_LIMIT)
VIEWERS = {"user 1": {"user_id": 1}, "user 2": {"user_id": 2}, "user 9": {"user_id": 9},
           "circle 1": {"circle_id": 1}, "nobody": {}}


@dataclass
class Site:
    db: MemoryWiki
    state: MemoryState = field(default_factory=lambda: MemoryState(clock_ms=lambda: NOW_MS))

    def __post_init__(self) -> None:
        self.cache = MemoryCache(self.state)
        self.service = ContextService(self.db, CharsCounter(), StrategyParams())
        report = rebuild(self.service, self.cache, self.db.live_ids_after(0, 10_000),
                         strategies=(STRATEGY,), seeds=(), max_token_limit=MAX_LIMIT, now_ms=NOW_MS)
        assert report.errors == {}

    def reader(self) -> SnapshotReader:
        config = ReaderConfig(strategies=(STRATEGY,), seeds=(), max_token_limit=MAX_LIMIT)
        return SnapshotReader(self.service, self.cache, MemoryCoordination(self.state), config,
                              clock_ms=lambda: NOW_MS + 1_000)

    def live(self, focus: int, limit: int, viewer: object, fmt: str = "json") -> bytes:
        outcome = self.service.compute(Request(focus, None, limit, 0, limit, viewer=viewer), STRATEGY)
        return outcome.to_json() if fmt == "json" else outcome.markdown().encode(
            "utf-8", "surrogatepass")


def _viewer(name: str) -> Viewer:
    return Viewer(**VIEWERS[name])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), viewer=st.sampled_from(sorted(VIEWERS)))
def test_a_proven_answer_is_the_viewers_live_answer(seed: int, viewer: str) -> None:
    site = Site(random_graph(seed, notes=30))
    asked, reader = _viewer(viewer), site.reader()
    for focus in site.db.live_ids_after(0, 10_000):
        stored = site.cache.read(SnapshotKey(focus, STRATEGY, None))
        for limit in LIMITS:
            for fmt in ("json", "markdown"):
                try:
                    served = reader.get(focus, token_limit=limit, viewer=asked,
                                        fmt=fmt, doughnut=True)
                except Forbidden:
                    with pytest.raises(Forbidden):
                        site.live(focus, limit, asked)
                    continue
                body = served.body if fmt == "json" else (served.text or "").encode("utf-8",
                                                                                      "surrogatepass")
                assert body == site.live(focus, limit, asked, fmt), (focus, limit, fmt, served.source)
        assert site.cache.read(SnapshotKey(focus, STRATEGY, None)) == stored  # nothing written


def test_the_proof_serves_a_subscriber_until_a_note_of_theirs_links_to_the_focus() -> None:
    db = MemoryWiki()
    own, theirs = db.notebook("Own", user=1), db.notebook("Theirs", user=2)
    focus, linked = db.note("Focus", own, None, H + "f"), db.note("Linked", own, None, H + "l")
    db.link(focus, linked)
    db.subscriptions.add((2, own))
    site = Site(db)
    reader = site.reader()
    subscriber = _viewer("user 2")
    served = reader.get(focus, viewer=subscriber)
    assert (served.source, served.body) == ("cache", site.live(focus, 2000, subscriber))
    assert reader.metrics.viewer_proven._value.get() == 1  # type: ignore[attr-defined]
    mine = db.note("Mine", theirs, None, H + "m")
    db.link(mine, focus)  # the subscriber now sees a referrer the owner does not
    held = _viewer("user 1")
    envelope_facts = site.service.compute(Request(focus, None, 2000, 0, 2000), STRATEGY).depends_on()
    assert not same_view(db, envelope_facts, held, subscriber)
    served = reader.get(focus, viewer=subscriber)
    assert (served.source, served.body) == ("live", site.live(focus, 2000, subscriber))
    assert b"Mine" in served.body
