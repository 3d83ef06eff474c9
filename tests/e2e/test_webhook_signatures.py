"""``POST /webhooks/note-events``: who may deliver, fast and without a worker.

Deliveries are signed with the ``standardwebhooks`` library, as a Standard Webhooks sender does, and
sent to the real ASGI app under FastAPI's TestClient. Only a delivery signed with the secret, over
this body and this webhook id, within five minutes, is enqueued; any other is refused with 401
before its payload is read. A webhook id is accepted once: a replay, even re-signed, is refused with
409 and not enqueued again. Every refused delivery leaves the recording empty.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from fastapi.testclient import TestClient

from tests.e2e.webhook_support import (
    OTHER_SECRET,
    Recorder,
    assert_rejected,
    event,
    payload,
    post,
    signed,
)


# -- 401: signature ------------------------------------------------------------------------------
def test_an_unsigned_delivery_is_refused(client: TestClient, recorder: Recorder) -> None:
    body = payload(event())
    assert_rejected(post(client, body, {"content-type": "application/json"}), 401, recorder)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_delivery_missing_one_header_is_refused(
    client: TestClient, recorder: Recorder, missing: str
) -> None:
    body = payload(event())
    headers = signed(body)
    del headers[missing]
    assert_rejected(post(client, body, headers), 401, recorder)


def test_a_delivery_signed_with_another_secret_is_refused(
    client: TestClient, recorder: Recorder
) -> None:
    body = payload(event())
    assert_rejected(post(client, body, signed(body, secret=OTHER_SECRET)), 401, recorder)


def test_a_tampered_body_is_refused(client: TestClient, recorder: Recorder) -> None:
    headers = signed(payload(event(42)))
    assert_rejected(post(client, payload(event(43)), headers), 401, recorder)


def test_a_signature_of_another_webhook_id_is_refused(client: TestClient, recorder: Recorder) -> None:
    body = payload(event())
    headers = signed(body)
    headers["webhook-id"] = f"msg_{uuid.uuid4().hex}"
    assert_rejected(post(client, body, headers), 401, recorder)


@pytest.mark.parametrize("offset_s", [-360, 360], ids=["6-min-old", "6-min-in-the-future"])
def test_a_timestamp_outside_five_minutes_is_refused(
    client: TestClient, recorder: Recorder, offset_s: int
) -> None:
    body = payload(event())
    at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=offset_s)
    assert_rejected(post(client, body, signed(body, at=at)), 401, recorder, mentions="timestamp")


@pytest.mark.parametrize("offset_s", [-240, 240], ids=["4-min-old", "4-min-in-the-future"])
def test_a_timestamp_within_five_minutes_is_accepted(
    client: TestClient, recorder: Recorder, offset_s: int
) -> None:
    body = payload(event())
    at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=offset_s)
    assert post(client, body, signed(body, at=at)).status_code == 202
    assert len(recorder.calls) == 1


@pytest.mark.parametrize("timestamp", ["", "yesterday", "nan", "inf", "1e400"])
def test_a_garbage_timestamp_is_refused(client: TestClient, recorder: Recorder, timestamp: str) -> None:
    body = payload(event())
    headers = signed(body)
    headers["webhook-timestamp"] = timestamp
    assert_rejected(post(client, body, headers), 401, recorder)


@pytest.mark.parametrize(
    "signature",
    ["v1", "garbage", "v1,", "v1,!!!not-base64!!!", "v1,abc", "v1,a,b", "v2,{valid}", "v1;{valid}"],
)
def test_a_garbage_signature_header_is_refused(
    client: TestClient, recorder: Recorder, signature: str
) -> None:
    body = payload(event())
    headers = signed(body)
    valid = headers["webhook-signature"].split(",", 1)[1]
    headers["webhook-signature"] = signature.replace("{valid}", valid)
    assert_rejected(post(client, body, headers), 401, recorder)


def test_one_valid_signature_among_several_is_enough(client: TestClient, recorder: Recorder) -> None:
    """Standard Webhooks sends space-separated signatures while a secret is being rotated."""
    body = payload(event())
    headers = signed(body)
    old = signed(body, secret=OTHER_SECRET, msg_id=headers["webhook-id"])["webhook-signature"]
    headers["webhook-signature"] = f"{old} {headers['webhook-signature']}"
    assert post(client, body, headers).status_code == 202
    assert len(recorder.calls) == 1


def test_signature_is_checked_before_the_payload(client: TestClient, recorder: Recorder) -> None:
    """A forged delivery learns nothing about the payload rules: 401, not 400."""
    body = b"{not json"
    assert_rejected(post(client, body, signed(body, secret=OTHER_SECRET)), 401, recorder)


# -- 409: replays --------------------------------------------------------------------------------
def test_a_replayed_webhook_id_is_refused_and_not_enqueued_again(
    client: TestClient, recorder: Recorder
) -> None:
    body = payload(event())
    headers = signed(body)
    assert post(client, body, headers).status_code == 202
    assert_replay = post(client, body, headers)
    assert assert_replay.status_code == 409, assert_replay.text
    assert headers["webhook-id"] in assert_replay.json()["error"]
    # the sender's own retry: same id, a fresh timestamp and signature
    resigned = signed(body, msg_id=headers["webhook-id"])
    assert post(client, body, resigned).status_code == 409
    assert len(recorder.calls) == 1


def test_different_webhook_ids_with_the_same_events_are_both_accepted(
    client: TestClient, recorder: Recorder
) -> None:
    body = payload(event())
    assert post(client, body, signed(body)).status_code == 202
    assert post(client, body, signed(body)).status_code == 202
    assert len(recorder.calls) == 2
