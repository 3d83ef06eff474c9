"""The reader's decisions over in-memory ports: hit, stale, miss, live-only, outages (fast)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
import pytest

from graphrag import CharsCounter, NoteNotFound, Request, StrategyParams
from graphrag.core.errors import CacheUnavailable, Unavailable
from service.context import ContextService
from service.decoding import decode_envelope
from service.envelope import Fact, SnapshotKey
from service.events import outdate_shown
from service.note_event import NoteEvent
from service.reader import ReaderConfig, Served, SnapshotReader
from service.rebuild import FULL_REBUILD
from tests.usecases.conftest import (
    LAYERED_LIMITS,
    MAX_LIMIT,
    SEEDS,
    STRATEGIES,
    CacheProxy,
    World,
)


def reader(world: World, service: ContextService | None = None, store: object = None,
           **kw: object) -> SnapshotReader:
    config = ReaderConfig(strategies=STRATEGIES, seeds=SEEDS, max_token_limit=MAX_LIMIT,
                          layered_limits=LAYERED_LIMITS)
    return SnapshotReader(service or world.service, store or world.cache,  # type: ignore[arg-type]
                          world.coordination, config, clock_ms=world.clock, **kw)  # type: ignore[arg-type]


def live(world: World, focus: int, limit: int = MAX_LIMIT, strategy: str = "wavefront",
         seed: int = 0) -> bytes:
    return world.service.compute(Request(focus, seed, limit, world.clock(), MAX_LIMIT),
                                 strategy).to_json()


def test_a_fresh_hit_reads_no_database(world: World) -> None:
    world.rebuild([10])
    want = live(world, 10)
    world.source.down = True
    served = reader(world).get(10, seed=0)
    assert (served.source, served.body) == ("cache", want)
    assert reader(world).get(10, seed=0, token_limit=300).source == "cache"


def test_past_the_soft_ttl_it_is_served_stale_and_one_refresh_queued(world: World) -> None:
    world.rebuild([10])
    world.now[0] += world.cache.soft_ttl_s * 1000
    queued: list[int] = []
    r = reader(world, on_stale=queued.append)
    assert [r.get(10, seed=s).source for s in SEEDS] == ["stale", "stale"]
    assert queued == [10]
    world.coordination.release_refresh(10)
    r.get(10, seed=0)
    assert queued == [10, 10]


def test_a_miss_is_computed_once_and_written_back(world: World) -> None:
    served = reader(world).get(21, seed=7, token_limit=300)
    assert served.source == "live"
    assert world.cache.read(SnapshotKey(21, "wavefront", 7)) is not None
    assert reader(world).get(21, seed=7).source == "cache"


def test_what_no_snapshot_answers_is_live_and_never_stored(world: World) -> None:
    r = reader(world)
    assert r.get(10, seed=0, token_limit=3 * MAX_LIMIT).source == "live"
    assert r.get(10, seed=0, strategy="layered", token_limit=700).source == "live"
    assert world.cache.read(SnapshotKey(10, "wavefront", 0)) is None
    assert world.cache.read(SnapshotKey(10, "layered", 0, 700)) is None


def test_cache_down_computes_live(world: World) -> None:
    world.state.down = True
    served = reader(world).get(10, seed=0)
    assert (served.source, served.body) == ("live", live(world, 10))


def test_database_down_serves_what_is_stored_else_unavailable(world: World) -> None:
    world.rebuild([10])
    world.source.down = True
    world.now[0] += 10 * world.cache.hard_ttl_s * 1000 // 10 - 1
    assert reader(world).get(10, seed=0).source == "stale"
    with pytest.raises(Unavailable):
        reader(world).get(21, seed=0)


def test_both_down_is_unavailable_and_a_deleted_note_is_not_found(world: World) -> None:
    with pytest.raises(NoteNotFound):
        reader(world).get(50)
    world.source.down = True
    world.state.down = True
    with pytest.raises(Unavailable):
        reader(world).get(10)


def test_smaller_limits_are_prefixes_of_the_stored_ranking(world: World) -> None:
    world.rebuild([2])
    stored = orjson.loads(reader(world).get(2, seed=0).body)
    for limit in (50, 120, 400):
        body = reader(world).get(2, seed=0, token_limit=limit).body
        assert body == live(world, 2, limit)
        assert len(orjson.loads(body)["relatedNotes"]) <= len(stored["relatedNotes"])


def test_once_an_edit_s_event_is_processed_its_old_text_is_never_served(world: World) -> None:
    world.rebuild([10])
    before = reader(world).get(10, seed=0).body
    assert b"Animals" in before  # 10's parent
    world.edit(2, title="Beasts")
    assert reader(world).get(10, seed=0).body == before  # no event yet: nothing to know
    world.events(NoteEvent("note.updated", 2))
    r = reader(world)
    served = r.get(10, seed=0)
    assert (served.source, served.body) == ("live", live(world, 10))
    assert b"Beasts" in served.body and b"Animals" not in served.body
    assert r.metrics.outdated._value.get() == 1
    assert 10 in {f for f, _ in world.dirty.take(100)}  # the drain still rebuilds every variant
    # written back: the live answer's bytes and computation time, now from the cache
    assert reader(world).get(10, seed=0) == Served(served.body, "cache", 0.0,
                                                   computed_at_ms=served.computed_at_ms)


def test_an_outdated_snapshot_of_another_seed_or_limit_is_computed_too(world: World) -> None:
    world.rebuild([10])
    world.edit(2, title="Beasts")
    world.events(NoteEvent("note.updated", 2))
    assert reader(world).get(10, seed=7, token_limit=300).body == live(world, 10, 300, seed=7)
    layered = reader(world).get(10, seed=0, strategy="layered", token_limit=LAYERED_LIMITS[0])
    assert layered.source == "live" and b"Beasts" in layered.body


def test_database_down_serves_an_outdated_snapshot_as_stale(world: World) -> None:
    world.rebuild([10])
    before = reader(world).get(10, seed=0)
    world.edit(2, title="Beasts")
    world.events(NoteEvent("note.updated", 2))
    world.source.down = True
    assert reader(world).get(10, seed=0) == Served(before.body, "stale", 0.0,
                                                   computed_at_ms=before.computed_at_ms)


def test_an_outdated_snapshot_of_a_deleted_focus_is_not_found(world: World) -> None:
    world.rebuild([33])
    world.edit(33, deleted_at=dt.datetime(2026, 1, 1))
    world.events(NoteEvent("note.deleted", 33))
    with pytest.raises(NoteNotFound):
        reader(world).get(33, seed=0)


def test_after_the_webhook_outdated_what_shows_a_note_no_read_serves_its_old_text(
    world: World,
) -> None:
    rebuilt = sorted(i for i, n in world.source.notes.items() if n.deleted_at is None)
    world.rebuild(rebuilt)
    world.edit(2, title="Beasts")
    outdated = outdate_shown([2], world.cache)
    assert {2, 10, 12} <= outdated < set(rebuilt)  # 10 and 12 are children of 2
    for focus in rebuilt:
        served = reader(world).get(focus, seed=0)
        if focus in outdated:
            assert (served.source, served.body) == ("live", live(world, focus))
        else:  # shows no note 2: left alone
            assert served.source == "cache" and b"Animals" not in served.body
        assert b"Animals" not in served.body
    assert world.dirty.size() == 0  # marking dirty is the event task's job


@pytest.mark.parametrize("stamped", [2, FULL_REBUILD], ids=["edit", "full-rebuild-start"])
def test_a_write_back_that_raced_an_edit_is_outdated_at_once_and_put_back(
    world: World, stamped: Fact,
) -> None:
    """Raced by an edit of 10's parent, or by the start of a full rebuild (whose page must not be
    overwritten by what was read before it)."""
    class EditedMeanwhile(ContextService):
        def compute_many(self, requests: Any, strategy: str, costing: Any = None) -> Any:
            world.cache.stamp_touched([stamped])  # while 10 is computed
            return super().compute_many(requests, strategy, costing)

    put_back: list[int] = []
    racing = reader(world, EditedMeanwhile(world.source, CharsCounter(), StrategyParams()),
                    on_raced=put_back.append)
    assert racing.get(10, seed=0).source == "live"
    assert put_back == [10]
    raw, counter = world.cache.read_current(SnapshotKey(10, "wavefront", 0))
    written = decode_envelope(raw)
    assert written is not None and written.generation < counter
    assert reader(world).get(10, seed=0).source == "live"  # computed again, not served


class _Unanswered(CacheProxy):
    """Redis stops answering the calls named in ``failing`` (after the snapshot's write went
    through)."""

    def __init__(self, world: World, failing: set[str]) -> None:
        super().__init__(world)
        self.failing = failing

    def __getattr__(self, name: str) -> Any:
        if name in self.failing:
            def refused(*args: Any, **kwargs: Any) -> Any:
                raise CacheUnavailable(f"{name}: connection reset")
            return refused
        return super().__getattr__(name)


@pytest.mark.parametrize("failing", [{"touched_since"}, {"touched_since", "bump_generations"}],
                         ids=["race-check", "race-check-and-outdating"])
def test_a_write_back_whose_race_check_goes_unanswered_counts_as_raced(
    world: World, failing: set[str],
) -> None:
    """Whether an edit raced the computation is unknown, so the snapshot just written is outdated
    (where Redis still takes it) and put back for a drain: never left to serve what it may miss."""
    put_back: list[int] = []
    flaky = reader(world, store=_Unanswered(world, failing), on_raced=put_back.append)
    assert flaky.get(10, seed=0).source == "live"
    assert put_back == [10]
    raw, counter = world.cache.read_current(SnapshotKey(10, "wavefront", 0))
    written = decode_envelope(raw)
    assert written is not None
    assert (written.generation < counter) == ("bump_generations" not in failing)


class _ReplyLost(CacheProxy):
    """Redis applies a write but its reply is lost (a timeout)."""

    def write_many(self, envelopes: Any) -> list[bool]:
        self.world.cache.write_many(envelopes)
        raise CacheUnavailable("write_many: timed out")


def test_a_write_back_whose_reply_is_lost_is_outdated_and_put_back(world: World) -> None:
    """The snapshot may be stored without its race check, so it is treated as raced."""
    put_back: list[int] = []
    lossy = reader(world, store=_ReplyLost(world), on_raced=put_back.append)
    assert lossy.get(10, seed=0).source == "live"
    assert put_back == [10]
    raw, counter = world.cache.read_current(SnapshotKey(10, "wavefront", 0))
    written = decode_envelope(raw)
    assert written is not None and written.generation < counter


class _BumpedBeforeTheWriteBack(CacheProxy):
    """An event's (or a webhook's) bump lands between the read's computation and its write-back."""

    def write_many(self, envelopes: Any) -> list[bool]:
        self.world.cache.bump_generations([env.note_id for env in envelopes])
        return self.world.cache.write_many(envelopes)


def test_a_refused_write_back_is_put_back_for_a_drain(world: World) -> None:
    """Whoever moved the generation may not queue the focus (a webhook's outdating never does), so
    the reader does: the answer was served live, and the snapshot is written by a drain."""
    put_back: list[int] = []
    refused = reader(world, store=_BumpedBeforeTheWriteBack(world), on_raced=put_back.append)
    assert refused.get(10, seed=0).source == "live"
    assert put_back == [10]
    assert world.cache.read(SnapshotKey(10, "wavefront", 0)) is None
