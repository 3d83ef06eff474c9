"""A webhook event of the other era than the database's is refused, naming what belongs to which.

Doughnut 2025's events place a note by ``parentId``/``targetNoteId``; today's by ``folderId``,
``notebookId`` and ``linkTargets``, and only today's Doughnut has folder and notebook events. Sent to
a database of the other era, an event would be taken (202) and then resolved by the wrong rules:
so the delivery is refused with 400 naming the field and the database's era, nothing is enqueued,
and its webhook id is not burnt. While the database's era cannot be learnt (down, layout ``auto``),
either era is taken, as before.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from service.note_event import foreign_to
from storage.database import open_engine
from storage.redis.coordination import RedisCoordination
from tests.e2e.webhook_support import (
    MAX_EVENTS,
    SECRET,
    TOKEN,
    Recorder,
    event,
    payload,
    post,
    reader_on,
    signed,
)
from worker.http.app import create_app
from worker.http.webhook import WebhookReceiver

pytestmark = pytest.mark.redis

TREE_EVENT = event(7, "note.moved", before={"parentId": 3}, after={"parentId": 4})
WIKI_EVENT = event(7, "note.moved", before={"folderId": 3, "notebookId": 1},
                   after={"folderId": 4, "notebookId": 1, "linkTargets": [9]})
FOLDER_EVENT = {"type": "folder.renamed", "folderId": 5, "occurredAt": "2026-01-01T00:00:00Z"}


def _client(guard: RedisCoordination, recorder: Recorder, model: str | None) -> TestClient:
    receiver = WebhookReceiver(SECRET, guard, recorder, max_events=MAX_EVENTS, model=lambda: model)
    app = create_app(reader_on(open_engine("sqlite://"), guard), reader_token=TOKEN,
                     registry=CollectorRegistry(), health=dict, webhook=receiver)
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def clients(guard: RedisCoordination, recorder: Recorder) -> Iterator[dict[str | None, TestClient]]:
    yield {model: _client(guard, recorder, model) for model in ("tree", "wiki", None)}


@pytest.mark.parametrize(("model", "sent", "named"), [
    ("wiki", TREE_EVENT, "parentId is Doughnut 2025's"),
    ("tree", WIKI_EVENT, "folderId, linkTargets, notebookId are today's Doughnut's"),
    ("tree", FOLDER_EVENT, "folder.renamed is today's Doughnut's"),
])
def test_the_other_eras_event_is_refused_naming_it(
    clients: dict[str | None, TestClient], recorder: Recorder, model: str, sent: dict[str, object],
    named: str,
) -> None:
    body = payload(event(1), sent)
    headers = signed(body)
    refused = post(clients[model], body, headers)
    assert refused.status_code == 400 and refused.json()["error"].startswith(f"events.1: {named}")
    assert recorder.calls == []
    fixed = payload(event(1))
    again = signed(fixed, msg_id=headers["webhook-id"])  # the id was not burnt
    assert post(clients[model], fixed, again).status_code == 202


def test_an_events_own_era_and_an_unknown_era_are_taken(
    clients: dict[str | None, TestClient], recorder: Recorder,
) -> None:
    for model, sent in (("tree", TREE_EVENT), ("wiki", WIKI_EVENT), ("wiki", FOLDER_EVENT),
                        (None, TREE_EVENT), (None, WIKI_EVENT)):
        body = payload(sent)
        assert post(clients[model], body, signed(body)).status_code == 202, (model, sent)
    assert len(recorder.calls) == 5
    assert foreign_to("wiki", {"type": "note.updated", "noteId": 1}) is None
