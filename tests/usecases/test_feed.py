"""Bounded staleness (service.feed): the change feed's heartbeat decides whether snapshots are served.

The guard's verdicts on every kind of heartbeat, one log line and one callback per transition; the
lag a feed reports (how long ago the server was where the feed is, unknown until it catches up);
the reader answering live, saying why, while the verdict says so, and falling back to what Redis
holds, as stale, when the database is down too; the watch that keeps the verdict current without a
round trip per read.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest

from service.envelope import SnapshotKey
from service.feed import FeedGuard
from service.reader import ReaderConfig, SnapshotReader
from storage.memory import MemoryFeedHeartbeat
from tests.usecases.conftest import MAX_LIMIT, SEEDS, STRATEGIES, World
from worker.cdc.lag import Lag, reached
from worker.feed_watch import FeedWatch

BOUND_MS = 10_000


def guard(world: World, **kw: object) -> tuple[FeedGuard, MemoryFeedHeartbeat]:
    heartbeat = MemoryFeedHeartbeat(world.state)
    return FeedGuard(heartbeat.read, max_lag_ms=BOUND_MS, **kw), heartbeat  # type: ignore[arg-type]


def test_no_heartbeat_a_fresh_one_and_a_disabled_guard_trust_snapshots(world: World) -> None:
    feed, heartbeat = guard(world)
    assert feed.refresh() is None  # no change capture here: webhooks only
    heartbeat.beat(behind_ms=900)
    world.now[0] += BOUND_MS - 1
    assert feed.refresh() is None
    world.now[0] += 10 * BOUND_MS
    assert FeedGuard(heartbeat.read, max_lag_ms=0).refresh() is None


@pytest.mark.parametrize(("behind_ms", "age_ms", "why"), [
    (0, BOUND_MS + 1, "last heartbeat is 10.0 s old (bound 10.0 s)"),
    (BOUND_MS + 500, 0, "10.5 s behind the database (bound 10.0 s)"),
    (-1, 0, "has not caught up with the database since it started"),
])
def test_an_old_a_lagging_or_a_restarting_feed_is_not_trusted(
    world: World, behind_ms: int, age_ms: int, why: str,
) -> None:
    feed, heartbeat = guard(world)
    heartbeat.beat(behind_ms=behind_ms)
    world.now[0] += age_ms
    reason = feed.refresh()
    assert reason is not None and why in reason and feed.reason == reason


def test_an_unreadable_heartbeat_ages_from_the_last_one_read(world: World) -> None:
    """A Redis blip shorter than the bound changes nothing; a longer one is a stopped feed."""
    feed, heartbeat = guard(world, clock_ms=world.clock)
    heartbeat.beat(behind_ms=0)
    world.now[0] += 2_000
    assert feed.refresh() is None
    world.state.down = True
    world.now[0] += BOUND_MS - 3_000
    assert feed.refresh() is None
    world.now[0] += 2_000
    reason = feed.refresh() or ""
    assert "11.0 s old" in reason and "cannot be read now" in reason


def test_without_change_capture_an_unreadable_cache_is_no_reason(world: World) -> None:
    feed, _ = guard(world, clock_ms=world.clock)
    world.state.down = True
    assert feed.refresh() is None  # never read anything
    world.state.down = False
    assert feed.refresh() is None  # no heartbeat: webhooks only
    world.state.down = True
    world.now[0] += 10 * BOUND_MS
    assert feed.refresh() is None


def test_one_log_line_and_one_callback_per_transition(
    world: World, caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str | None] = []
    feed, heartbeat = guard(world, on_change=seen.append)
    heartbeat.beat(behind_ms=0)
    with caplog.at_level(logging.WARNING, logger="graphrag.feed"):
        for step in range(6):  # trusted, trusted, then 3 refreshes of a stopped feed, then back
            if step == 2:
                world.now[0] += BOUND_MS + 1
            if step == 5:
                heartbeat.beat(behind_ms=0)
            feed.refresh()
            world.now[0] += 1_000
    assert [reason is None for reason in seen] == [False, True]
    assert len(caplog.records) == 2 and "caught up" in caplog.records[1].getMessage()


def test_the_lag_is_how_long_ago_the_server_was_where_the_feed_is() -> None:
    assert reached("gtid:0-1-10", "gtid:0-1-10") and reached("gtid:0-1-12", "gtid:0-1-10")
    assert not reached("gtid:0-1-9", "gtid:0-1-10")
    assert reached("file:bin.000002:400", "file:bin.000002:400")
    assert reached("file:bin.000003:4", "file:bin.000002:900")
    assert not reached("file:bin.000002:399", "file:bin.000002:400")
    lag = Lag()
    assert lag.measure("gtid:0-1-5", "gtid:0-1-9", 100.0) is None  # a backlog: unknown
    assert lag.measure("gtid:0-1-8", "gtid:0-1-12", 101.0) is None
    assert lag.measure("gtid:0-1-10", "gtid:0-1-14", 102.0) == 2.0  # at the server's of t=100
    # a busy server: never equal when sampled, yet a feed one sample behind lags one second
    assert lag.measure("gtid:0-1-14", "gtid:0-1-20", 103.0) == 1.0
    assert lag.measure("gtid:0-1-20", "gtid:0-1-20", 104.0) == 0.0


def _reader(world: World, reason: list[str | None]) -> SnapshotReader:
    config = ReaderConfig(strategies=STRATEGIES, seeds=SEEDS, max_token_limit=MAX_LIMIT)
    return SnapshotReader(world.service, world.cache, world.coordination, config,
                          clock_ms=world.clock, distrust=lambda: reason[0])


def test_a_distrusting_reader_answers_live_says_why_and_writes_nothing(world: World) -> None:
    world.rebuild([10])
    world.edit(10, title="Kitten")  # committed, its event not (yet) read from the log
    reason: list[str | None] = [None]
    reader = _reader(world, reason)
    trusted = reader.get(10, seed=0)
    assert trusted.source == "cache" and b"Kitten" not in trusted.body
    reason[0] = "the change feed's last heartbeat is 12.0 s old (bound 10.0 s)"
    stored = world.cache.read(SnapshotKey(11, "wavefront", 0))
    for note in (10, 11):
        served = reader.get(note, seed=0)
        assert (served.source, served.reason) == ("live", reason[0])
    assert b"Kitten" in reader.get(10, seed=0).body
    assert world.cache.read(SnapshotKey(11, "wavefront", 0)) == stored is None  # no write-back
    assert reader.metrics.distrusted._value.get() == 3  # type: ignore[attr-defined]
    world.source.down = True  # the database too: what Redis holds, as stale, still saying why
    served = reader.get(10, seed=0)
    assert (served.source, served.reason) == ("stale", reason[0])
    reason[0] = None
    world.source.down = False
    assert reader.get(10, seed=0).source == "cache"


def test_the_watch_refreshes_at_first_use_then_in_the_background(world: World) -> None:
    heartbeat = MemoryFeedHeartbeat(world.state)
    heartbeat.beat(behind_ms=0)
    watch = FeedWatch(FeedGuard(heartbeat.read, max_lag_ms=BOUND_MS), every_s=0.02)
    try:
        assert watch.reason() is None
        world.now[0] += BOUND_MS + 1
        deadline = time.monotonic() + 10
        while watch.reason() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watch.reason() is not None, "the background refresh never saw the heartbeat age"
    finally:
        watch.close()
    assert FeedWatch(FeedGuard(heartbeat.read, max_lag_ms=0)).reason() is None


def test_a_forked_child_watches_with_a_thread_of_its_own(world: World) -> None:
    """A worker process forked after the parent asked has none of the parent's threads: its first
    question starts its own watch (else its verdict would never be refreshed)."""
    heartbeat = MemoryFeedHeartbeat(world.state)
    heartbeat.beat(behind_ms=0)
    watch = FeedWatch(FeedGuard(heartbeat.read, max_lag_ms=BOUND_MS), every_s=0.02)
    try:
        assert watch.reason() is None
        child = os.fork()
        if child == 0:  # the child: exit 0 only if its first question started a watching thread
            watching = watch.reason() is None and any(
                t.name == "graphrag-feed-watch" for t in threading.enumerate())
            os._exit(0 if watching else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "the forked child started no watch"
    finally:
        watch.close()


def test_a_disabled_guard_reads_nothing() -> None:
    """GRAPHRAG_MAX_FEED_LAG_S=0: no heartbeat is read, snapshots are always served."""
    def refuse() -> None:
        raise AssertionError("a disabled guard read the heartbeat")

    assert FeedGuard(refuse, max_lag_ms=0).refresh() is None  # type: ignore[arg-type]
