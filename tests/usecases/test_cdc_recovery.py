"""Change capture's recovery from a purged log position (worker.cdc.capture): the server's current
position is read *before* the full rebuild is queued, so an edit committed in between is either in the
log read from that position or committed before the run starts, never neither. Fast: the log and the
server are stand-ins; tests/cdc/test_capture.py runs the same path against a real binlog server."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from storage.binlog import BinlogPosition, BinlogUnavailable, PositionPurged, Transaction
from storage.memory import MemoryPositions
from worker.cdc import capture as cdc

OLD, NEW = BinlogPosition(file="bin.000001", offset=4), BinlogPosition(file="bin.000002", offset=4)


def test_a_purged_position_is_replaced_by_one_read_before_the_full_rebuild_is_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps: list[str] = []
    stop = threading.Event()

    def purged(url: str, **_: Any) -> Iterator[Any]:
        raise PositionPurged("the server no longer has bin.000001")
        yield  # a generator, as the real stream is

    def position_now(url: str) -> BinlogPosition:
        steps.append("position read")
        return NEW

    def full_rebuild(reason: str) -> None:
        steps.append("full rebuild queued")
        stop.set()

    monkeypatch.setattr(cdc, "stream", purged)
    monkeypatch.setattr(cdc, "current_position", position_now)
    positions = MemoryPositions()
    positions.put(OLD.to_text())
    cdc.Capture(url="mysql://unused", server_id=1, model="tree", positions=positions,
                enqueue=lambda events: None, full_rebuild=full_rebuild, max_events=100,
                stop=stop).follow()
    assert steps == ["position read", "full rebuild queued"]
    assert positions.get() == NEW.to_text()


def test_each_opened_stream_says_where_it_follows_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stored position is told when the server starts sending (``graphrag cdc`` logs it), and
    again after a lost log, from the position stored by then."""
    stop, opens = threading.Event(), [0]
    told: list[BinlogPosition] = []

    def read_once_then_lost(url: str, *, opened: Callable[[], object],
                            **_: Any) -> Iterator[Transaction]:
        opened()
        opens[0] += 1
        if opens[0] == 2:
            stop.set()
            return
        yield Transaction(position_after=NEW)
        raise BinlogUnavailable("connection lost")

    monkeypatch.setattr(cdc, "stream", read_once_then_lost)
    monkeypatch.setattr(cdc, "_RECONNECT_S", 0.0)
    positions = MemoryPositions()
    positions.put(OLD.to_text())
    cdc.Capture(url="mysql://unused", server_id=1, model="tree", positions=positions,
                enqueue=lambda events: None, full_rebuild=lambda reason: None, max_events=100,
                stop=stop, on_opened=told.append).follow()
    assert told == [OLD, NEW]
