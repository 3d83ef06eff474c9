"""The webhook records an edit itself (worker.enqueue): resolved, outdated and marked dirty before
its answer, one drain queued for when the foci settle, and the event task only when that fails
(fast: the memory twins, a broker that records what it is handed)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kombu.exceptions import OperationalError

from graphrag.core.errors import CacheUnavailable
from service.events import sibling_radius
from tasks.message import DUE_HEADER, EDITED, SENT_HEADER
from tests.usecases.conftest import World
from worker.enqueue import EnqueueFailed, celery_drainer, recorder, recording


class Broker:
    """What a broker was handed (task name, options); ``down`` refuses every message."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.down = False

    def send_task(self, name: str, **options: Any) -> None:
        if self.down:
            raise OperationalError("connection refused")
        self.sent.append((name, options))


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def test_an_edit_is_dirty_before_the_answer_and_its_drain_comes_when_it_settles(world: World) -> None:
    asked: list[float] = []
    record = recorder(world.source, world.cache, world.dirty, drain_in=asked.append, debounce_ms=50,
                      sibling_radius=sibling_radius(world.strategies))
    generations = world.cache.generations([10])[10]
    before_ms = wall_ms()
    record([{"type": "note.updated", "noteId": 10}])
    after_ms = wall_ms()
    taken = world.dirty.take(100)
    assert 10 in {note_id for note_id, _ in taken}
    assert all(before_ms <= score <= after_ms for _, score in taken)
    assert world.cache.generations([10])[10] > generations
    (delay_s,) = asked  # the debounce, less what resolving took
    assert (before_ms + 50 - after_ms) / 1000 <= delay_s <= 0.05


def test_a_record_that_fails_hands_the_events_on_to_the_event_task() -> None:
    handed: list[list[dict[str, Any]]] = []
    failures = iter([None, CacheUnavailable("redis unreachable"), ValueError("a bug")])

    def record(events: list[dict[str, Any]]) -> None:
        failure = next(failures)
        if failure is not None:
            raise failure

    take = recording(record, handed.append)
    for note_id in (1, 2, 3):
        take([{"type": "note.updated", "noteId": note_id}])
    assert handed == [[{"type": "note.updated", "noteId": 2}], [{"type": "note.updated", "noteId": 3}]]


def test_a_batch_of_events_goes_to_the_event_task_without_holding_its_sender() -> None:
    recorded: list[list[dict[str, Any]]] = []
    handed: list[list[dict[str, Any]]] = []
    take = recording(recorded.append, handed.append, at_most=2)
    small = [{"type": "note.updated", "noteId": i} for i in (1, 2)]
    batch = [{"type": "note.updated", "noteId": i} for i in (3, 4, 5)]
    take(small)
    take(batch)
    assert recorded == [small] and handed == [batch]


@pytest.mark.parametrize(("subsecond", "expected"), [
    (True, {"kwargs": {"flag": EDITED}, "countdown": 0.04}),
    (False, {"kwargs": {"flag": EDITED, "wait_s": 0.04}}),
])
def test_an_edits_drain_is_queued_once_while_one_waits(
    world: World, subsecond: bool, expected: dict[str, Any],
) -> None:
    broker = Broker()
    drain_in = celery_drainer(broker, world.coordination,  # type: ignore[arg-type]
                              subsecond_countdowns=subsecond)
    before_ms = wall_ms()
    drain_in(0.04)
    drain_in(0.01)  # a second edit meanwhile: the first one's drain takes it too
    ((name, options),) = broker.sent
    headers = options.pop("headers")
    assert name == "graphrag.drain" and options.pop("queue") == "realtime"
    assert options == {**expected, "retry": False}
    assert before_ms + 40 <= headers[DUE_HEADER] <= wall_ms() + 40
    assert (SENT_HEADER in headers) == (not subsecond)


def test_a_drain_the_broker_refused_is_asked_for_again_by_the_next_edit(world: World) -> None:
    broker = Broker()
    drain_in = celery_drainer(broker, world.coordination,  # type: ignore[arg-type]
                              subsecond_countdowns=True)
    broker.down = True
    with pytest.raises(EnqueueFailed, match="broker unavailable"):
        drain_in(0.05)
    broker.down = False
    drain_in(0.05)
    assert [name for name, _ in broker.sent] == ["graphrag.drain"]
