"""When the drain task queues the next drain (fast: the memory twins, ``apply_async`` recorded)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest

from service import events as events_module
from service.carry import Carry
from storage.memory import MemoryProgress
from tasks import jobs
from tasks import runtime as runtime_module
from tasks.runtime import Runtime
from tests.usecases.conftest import World


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(jobs.drain, "apply_async", lambda **options: calls.append(options))
    return calls


def runtime(world: World) -> Runtime:
    return Runtime(notes=world.source, snapshots=world.cache, dirty=world.dirty,
                   coordination=world.coordination, progress=None,  # type: ignore[arg-type]
                   rebuild=world.rebuild, rebuild_piece=lambda ids: world.rebuild(ids, preload=True),
                   clock_ms=world.clock, bulk_backlog=lambda: 0, debounce_ms=50)


def test_a_retry_waiting_out_its_delay_does_not_swallow_an_edits_drain(
    world: World, sent: list[dict[str, Any]],
) -> None:
    rt = runtime(world)
    jobs.schedule_drain(rt, countdown_s=0.2, reason=jobs.RETRY)
    jobs.schedule_drain(rt)  # an edit: its own drain, after the debounce
    jobs.schedule_drain(rt)  # a second edit meanwhile: coalesced with the first
    assert [(s["kwargs"]["flag"], s.get("countdown")) for s in sent] == [
        (jobs.RETRY, 0.2), (jobs.EDITED, 0.05)]


@pytest.mark.parametrize(("resolve_ms", "countdown_s"), [(30, 0.02), (80, None)])
def test_an_edits_drain_waits_out_the_debounce_from_when_its_foci_were_dirtied(
    world: World, sent: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch,
    resolve_ms: int, countdown_s: float | None,
) -> None:
    """The time the event task spends resolving an edit counts towards its debounce: the drain
    comes when the foci settle, not a debounce after the event task is done (at once when the
    resolving took longer than the debounce)."""
    monkeypatch.setattr(runtime_module, "_runtime", (os.getpid(), runtime(world)))
    record = events_module.record_events

    def slow_record(*args: Any, **options: Any) -> set[int]:
        world.now[0] += resolve_ms
        return record(*args, **options)

    monkeypatch.setattr(events_module, "record_events", slow_record)
    dirtied_ms = world.clock()
    assert jobs.process_events([{"type": "note.updated", "noteId": 10}]) > 0
    assert {score for _, score in world.dirty.take(100)} == {dirtied_ms}
    (message,) = sent
    assert message["kwargs"] == {"flag": jobs.EDITED}
    assert message.get("countdown") == (None if countdown_s is None else pytest.approx(countdown_s))


def test_the_next_drain_comes_at_once_while_settled_foci_wait(world: World) -> None:
    rt = runtime(world)
    world.dirty.add([1, 2], now_ms=world.clock() - 1_000)
    assert jobs._next_drain(rt, written=100) == (0, jobs.CONTINUED)  # behind what arrived since
    assert jobs._next_drain(rt, written=0) == (0.2, jobs.RETRY)  # others hold them: look again
    world.dirty.done(world.dirty.take(10))
    world.dirty.add([3], now_ms=world.clock() - 20)
    for written in (100, 0):  # only fresh ones: when the oldest settles, whatever this one wrote
        countdown_s, reason = jobs._next_drain(rt, written=written)
        assert reason == jobs.SETTLE and countdown_s == pytest.approx(0.03)


def test_a_retry_does_not_swallow_the_drain_for_when_foci_settle(
    world: World, sent: list[dict[str, Any]],
) -> None:
    rt = runtime(world)
    jobs.schedule_drain(rt, countdown_s=0.2, reason=jobs.RETRY)  # others held the settled ones
    jobs.schedule_drain(rt, countdown_s=0.03, reason=jobs.SETTLE)  # an edit's foci settle sooner
    assert [(s["kwargs"]["flag"], s.get("countdown")) for s in sent] == [
        (jobs.RETRY, 0.2), (jobs.SETTLE, 0.03)]


def test_a_retry_waits_in_the_broker_where_it_cannot_wait_under_a_second(
    world: World, sent: list[dict[str, Any]],
) -> None:
    """On RabbitMQ a wait under a second is spent in a worker process; a retry, which others' own
    successors make redundant but for a crash, must not hold a process for it."""
    rt = dataclasses.replace(runtime(world), subsecond_countdowns=False)
    jobs.schedule_drain(rt, countdown_s=0.2, reason=jobs.RETRY)
    jobs.schedule_drain(rt, countdown_s=0.03, reason=jobs.SETTLE)  # an edit's foci: as they settle
    assert [(s["kwargs"], s.get("countdown")) for s in sent] == [
        ({"flag": jobs.RETRY}, 1.0), ({"flag": jobs.SETTLE, "wait_s": 0.03}, None)]


def test_every_busy_drain_queues_its_own_successor(world: World, sent: list[dict[str, Any]]) -> None:
    rt = runtime(world)
    for _ in range(2):  # two worker processes ending a batch each, with more settled foci waiting
        jobs.schedule_drain(rt, 0, reason=jobs.CONTINUED)
    assert [s["kwargs"]["flag"] for s in sent] == [jobs.CONTINUED, jobs.CONTINUED]


def test_a_full_rebuild_reads_afresh_what_a_drain_carried(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A change no event announced (the full rebuild recovers those) must not be read from data a
    worker process carries from before the full rebuild started (service.carry)."""
    carry = Carry()
    rt = dataclasses.replace(runtime(world), progress=MemoryProgress(world.state),
                             rebuild=lambda ids: world.rebuild(ids, carry=carry),
                             rebuild_piece=lambda ids: world.rebuild(ids, carry=carry, preload=True))
    monkeypatch.setattr(runtime_module, "_runtime", (os.getpid(), rt))
    monkeypatch.setattr(jobs.rebuild_piece, "apply_async", lambda args: jobs.rebuild_piece(*args))
    monkeypatch.setattr(jobs.nightly_dispatch, "apply_async", lambda *a, **k: None)
    rt.rebuild([30])  # a drain: its process now carries note 10's row
    world.edit(10, title="Renamed without an event")
    jobs.nightly_dispatch()
    snapshots = [v for k, (v, _) in world.cache.state.snapshots.items() if k.note_id == 30]
    assert snapshots and all(b"Renamed without an event" in v for v in snapshots)


def test_a_drain_waiting_under_a_second_counts_its_wait_from_when_it_was_sent(
    world: World, sent: list[dict[str, Any]],
) -> None:
    """On RabbitMQ a sub-second debounce is waited out by the task: a drain that arrives late (it
    queued behind other work) must not wait the whole debounce again on top."""
    rt = dataclasses.replace(runtime(world), subsecond_countdowns=False)
    jobs.schedule_drain(rt)
    (message,) = sent
    sent_ms = message["headers"][jobs.SENT_HEADER]
    assert message["kwargs"] == {"flag": jobs.EDITED, "wait_s": 0.05} and sent_ms == world.clock()
    assert jobs._still_to_wait_s(0.05, sent_ms, sent_ms + 10) == pytest.approx(0.04)
    assert jobs._still_to_wait_s(0.05, sent_ms, sent_ms + 80) == 0  # delivered after its foci settled
    assert jobs._still_to_wait_s(0.05, None, sent_ms + 80) == 0.05  # an older sender's message
    assert jobs._still_to_wait_s(5, sent_ms, sent_ms) == 1.0  # never more than a second
