"""``POST /webhooks/note-events`` outdates before it answers (``worker.enqueue.outdating``).

Before the 202, every snapshot showing an edited note is outdated, so no read after the answer serves
the old note. Outdating runs before the enqueue, never for a refused delivery, and its failure never
fails the delivery.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from graphrag.core.errors import CacheUnavailable
from service.envelope import SnapshotKey
from service.events import outdate_shown
from service.metrics import EDIT_STAGES, edit_stages
from storage.database import open_engine
from storage.profiles.admin_2025 import create_tables
from storage.redis.cache import RedisCache
from storage.redis.coordination import RedisCoordination
from tasks.message import SENT_HEADER
from tests.contracts.cache_contract import envelope
from tests.e2e.webhook_support import (
    MAX_EVENTS,
    OTHER_SECRET,
    SECRET,
    TOKEN,
    Recorder,
    event,
    payload,
    post,
    reader_on,
    signed,
)
from worker.enqueue import celery_enqueuer, outdating
from worker.http.app import create_app
from worker.http.webhook import WebhookReceiver


# -- outdating before the answer (worker.enqueue.outdating, the server's enqueue) ------------------
def outdating_client(tmp_path: Path, guard: RedisCoordination, enqueue: Recorder,
                     outdate: Any) -> TestClient:
    engine = open_engine(f"sqlite:///{tmp_path / 'notes.db'}")
    create_tables(engine)
    receiver = WebhookReceiver(SECRET, guard, outdating(enqueue, outdate), max_events=MAX_EVENTS)
    app = create_app(reader_on(engine, guard), reader_token=TOKEN, registry=CollectorRegistry(),
                     health=lambda: {"redis": "ok"}, webhook=receiver)
    return TestClient(app, raise_server_exceptions=False)


def test_before_answering_it_outdates_every_snapshot_showing_an_edited_note(
    tmp_path: Path, guard: RedisCoordination, recorder: Recorder,
) -> None:
    cache = RedisCache(guard.redis, prefix=guard.keys.prefix)
    shows_7 = envelope(10, cache.bump_generations([10])[10], [7, 8])
    shows_8 = envelope(11, cache.bump_generations([11])[11], [8])
    assert cache.write_many([shows_7, shows_8]) == [True, True]
    with outdating_client(tmp_path, guard, recorder,
                          lambda ids: outdate_shown(ids, cache)) as client:
        body = payload(event(7), event(None, "folder.renamed", folderId=3))
        assert post(client, body, signed(body)).status_code == 202
    assert cache.read_current(SnapshotKey(10, "wavefront", 0))[1] > shows_7.generation
    assert cache.read_current(SnapshotKey(11, "wavefront", 0))[1] == shows_8.generation
    assert cache.generations([7])[7] > 0 and len(recorder.calls) == 1


def test_outdating_precedes_the_enqueue_and_its_failure_never_fails_the_delivery(
    tmp_path: Path, guard: RedisCoordination, recorder: Recorder,
) -> None:
    """Before the event task can run (and have a worker take its foci, whose writes a later bump
    would refuse), and even when the broker refuses the delivery: the edit is committed either way."""
    order: list[str] = []
    asked: list[list[int]] = []

    def outdate(ids: list[int]) -> None:
        order.append(f"outdate (enqueued so far: {recorder.attempts})")
        asked.append(ids)
        if len(asked) == 1:
            raise CacheUnavailable("redis unreachable")
        if len(asked) == 2:
            raise ValueError("a foreign value under a dep: key")  # not even a GraphRagError

    with outdating_client(tmp_path, guard, recorder, outdate) as client:
        body = payload(event(4))
        assert post(client, body, signed(body)).status_code == 202  # a CacheUnavailable
        body = payload(event(7))
        assert post(client, body, signed(body)).status_code == 202  # any other error
        assert order == ["outdate (enqueued so far: 0)", "outdate (enqueued so far: 1)"]
        asked.clear()
        recorder.calls.clear()
        bad = payload(event(5))
        assert post(client, bad, signed(bad, secret=OTHER_SECRET)).status_code == 401
        assert asked == []
        recorder.down = True
        body = payload(event(5), event(6))
        assert post(client, body, signed(body)).status_code == 503
        assert asked == [[5, 6]] and recorder.calls == []
        recorder.down = False
        assert post(client, body, signed(body)).status_code == 202
    assert asked == [[5, 6], [5, 6]] and recorder.calls == [orjson.loads(body)["events"]]


class Sent:
    """What a broker was handed: the task's name, its arguments and options."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, dict[str, Any]]] = []

    def send_task(self, name: str, **options: Any) -> None:
        self.tasks.append((name, options))


def test_an_arriving_edit_times_its_outdating_and_its_message_says_when_it_was_sent() -> None:
    registry, broker = CollectorRegistry(), Sent()
    stages = edit_stages(registry)
    enqueue = outdating(celery_enqueuer(broker, stages), lambda ids: None, stages)  # type: ignore[arg-type]
    before_ms = time.time_ns() // 1_000_000
    enqueue([{"type": "note.updated", "noteId": 7}])
    enqueue([{"type": "folder.renamed", "folderId": 3}])  # (no note to outdate)
    assert [name for name, _ in broker.tasks] == ["graphrag.process_events"] * 2
    sent_ms = broker.tasks[0][1]["headers"][SENT_HEADER]
    assert before_ms <= sent_ms <= time.time_ns() // 1_000_000
    counts = {stage: registry.get_sample_value("graphrag_edit_stage_seconds_count",
                                               {"stage": stage}) for stage in EDIT_STAGES}
    assert counts == {"outdate": 1, "enqueue": 2, "delivery": 0, "resolve": 0, "debounce": 0,
                      "compute": 0, "write": 0}
