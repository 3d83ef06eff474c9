"""``POST /webhooks/note-events`` while something it needs is missing or down: 503, nothing enqueued.

A failed enqueue, an unreachable replay guard (fakeredis disconnected), a missing webhook secret and
a broker nothing listens on (the real Celery enqueuer, Redis and AMQP) each answer 503 quickly, so a
sender retries; the retry under the same webhook id is then accepted and enqueued once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from storage.database import open_engine
from storage.redis.coordination import RedisCoordination
from tests.e2e.webhook_support import (
    MAX_EVENTS,
    PATH,
    SECRET,
    TOKEN,
    Recorder,
    coordination,
    event,
    payload,
    post,
    reader_on,
    signed,
)
from tests.redis.readers import redis_url
from worker.celery_app import create_celery
from worker.enqueue import celery_enqueuer, warm_sender
from worker.http.app import create_app
from worker.http.webhook import WebhookReceiver
from worker.settings import Settings


# -- 503: the queue or the replay guard is down --------------------------------------------------
def test_a_failed_enqueue_is_503_and_the_same_id_is_accepted_on_retry(
    client: TestClient, recorder: Recorder
) -> None:
    body = payload(event(5), event(6, "note.deleted"))
    headers = signed(body)
    recorder.down = True
    first = post(client, body, headers)
    assert first.status_code == 503, first.text
    assert "enqueue" in first.json()["error"]
    assert recorder.calls == []
    recorder.down = False
    retry = post(client, body, signed(body, msg_id=headers["webhook-id"]))
    assert retry.status_code == 202, retry.text
    assert len(recorder.calls) == 1 and [e["noteId"] for e in recorder.calls[0]] == [5, 6]
    assert post(client, body, headers).status_code == 409  # and now it is a replay
    assert len(recorder.calls) == 1


def test_an_unreachable_replay_guard_is_503_and_nothing_is_enqueued(
    client: TestClient, recorder: Recorder, server: fakeredis.FakeServer
) -> None:
    body = payload(event())
    headers = signed(body)
    server.connected = False
    response = post(client, body, headers)
    assert response.status_code == 503, response.text
    assert recorder.calls == [] and recorder.attempts == 0
    server.connected = True
    assert post(client, body, headers).status_code == 202
    assert len(recorder.calls) == 1


def test_without_a_secret_the_route_answers_503(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'notes.db'}")
    reader = reader_on(engine, coordination(fakeredis.FakeRedis()))
    app = create_app(reader, reader_token=TOKEN, registry=CollectorRegistry(),
                     health=lambda: {"redis": "ok"})
    body = payload(event())
    with TestClient(app, raise_server_exceptions=False) as test_client:
        response = test_client.post(PATH, content=body, headers=signed(body))
    assert response.status_code == 503
    assert "GRAPHRAG_WEBHOOK_SECRET" in response.json()["error"]
    engine.dispose()


@pytest.mark.parametrize("broker", ["redis://127.0.0.1:1/0", "amqp://guest:guest@127.0.0.1:1/"])
def test_an_unreachable_broker_is_503_through_the_real_celery_enqueuer(
    tmp_path: Path, guard: RedisCoordination, broker: str
) -> None:
    """The production enqueuer on a broker nothing listens on: 503, nothing claimed, retry works."""
    settings = Settings(**{"CELERY_BROKER_URL": broker})  # type: ignore[arg-type]
    engine = open_engine(f"sqlite:///{tmp_path / 'notes.db'}")
    reader = reader_on(engine, guard)
    working = Recorder()
    enqueue = celery_enqueuer(create_celery(settings))
    broker_up = False

    def switchable(events: list[dict[str, Any]]) -> None:
        (working if broker_up else enqueue)(events)

    receiver = WebhookReceiver(SECRET, guard, switchable, max_events=MAX_EVENTS)
    app = create_app(reader, reader_token=TOKEN, registry=CollectorRegistry(),
                     health=lambda: {"redis": "ok"}, webhook=receiver)
    body = payload(event())
    headers = signed(body)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        started = time.perf_counter()
        response = test_client.post(PATH, content=body, headers=headers)
        elapsed = time.perf_counter() - started
        assert response.status_code == 503, response.text
        assert "broker unavailable" in response.json()["error"]
        assert elapsed < 10, f"the 503 took {elapsed:.1f} s: a sender's request would time out"
        broker_up = True
        assert test_client.post(PATH, content=body, headers=headers).status_code == 202
    assert len(working.calls) == 1
    engine.dispose()


def test_a_warmed_up_sender_holds_a_connected_producer_for_its_first_send() -> None:
    """warm_sender on the real Redis: the app's pool then holds a producer whose connection is
    open, so the first event's send neither imports the transport nor connects."""
    celery = create_celery(Settings(**{"CELERY_BROKER_URL": redis_url()}))  # type: ignore[arg-type]
    assert warm_sender(celery)
    with celery.producer_or_acquire() as producer:
        assert producer.connection.connected


@pytest.mark.parametrize("broker", ["redis://127.0.0.1:1/0", "amqp://guest:guest@127.0.0.1:1/"])
def test_a_broker_that_does_not_answer_the_warm_up_is_left_to_the_first_send(broker: str) -> None:
    """No exception and no wait for retries: a start never fails or stalls on the broker."""
    celery = create_celery(Settings(**{"CELERY_BROKER_URL": broker}))  # type: ignore[arg-type]
    started = time.perf_counter()
    assert not warm_sender(celery)
    assert time.perf_counter() - started < 5


def test_a_warm_up_that_fails_in_any_other_way_is_left_to_the_first_send() -> None:
    """The warm-up runs in a thread of its own: whatever a stand-in or a broken transport raises
    there is logged and left to the first send, never an exception in that thread."""

    class Broken:
        backend = None

        def producer_or_acquire(self) -> object:
            raise AttributeError("no producer here")

    assert not warm_sender(Broken())  # type: ignore[arg-type]
