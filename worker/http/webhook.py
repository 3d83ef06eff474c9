"""``POST /webhooks/note-events``: verified, validated, de-duplicated, enqueued — never reads MySQL.

Standard Webhooks (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``; HMAC-SHA256 over
``id.timestamp.body``; ±5 minutes) verified by the ``standardwebhooks`` library. A delivery id is
accepted once (409 on a replay). Payload::

    {"events": [{"type": "note.updated", "noteId": 42, "occurredAt": "2026-01-01T00:00:00Z",
                 "before": {"parentId": 7, "targetNoteId": null}, "after": {...}}]}

202 once enqueued; 503 when the queue (or the replay guard) is unreachable, so the sender retries.
The server's enqueue also outdates, with Redis alone, the snapshots that show an edited note
(:func:`worker.enqueue.outdating`): from the answer on, no read serves that note's old text.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from graphrag import GraphRagError
from service.note_event import EVENT_TYPES, SUBJECTS, foreign_to
from service.ports import Coordination
from worker.enqueue import EnqueueFailed

__all__ = ["MAX_BODY_BYTES", "WebhookReceiver"]

MAX_BODY_BYTES = 2 * 1024 * 1024
_REPLAY_WINDOW_S = 15 * 60  # longer than the ±5 min the signature's timestamp may be off
NoteId = Annotated[StrictInt, Field(ge=0, le=2**32 - 1)]
MAX_LINK_TARGETS = 10_000


class _Refs(BaseModel):
    """Where a note (or folder) sat: the 2025 tree's parent and target, or 2026's folder, notebook
    and resolved link targets (a folder's own notebook and parent folder)."""

    model_config = ConfigDict(extra="forbid")
    parentId: NoteId | None = None
    targetNoteId: NoteId | None = None
    folderId: NoteId | None = None
    notebookId: NoteId | None = None
    parentFolderId: NoteId | None = None
    linkTargets: list[NoteId] | None = Field(default=None, max_length=MAX_LINK_TARGETS)


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal[EVENT_TYPES]  # type: ignore[valid-type]
    noteId: NoteId | None = None
    folderId: NoteId | None = None
    notebookId: NoteId | None = None
    occurredAt: dt.datetime
    before: _Refs | None = None
    after: _Refs | None = None

    @model_validator(mode="after")
    def _names_its_subject(self) -> _Event:
        subject = SUBJECTS[self.type.split(".", 1)[0]]
        if getattr(self, subject) is None:
            raise ValueError(f"a {self.type} event needs {subject}")
        return self


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore")
    events: list[_Event] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: dict[str, Any]


def _reason(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    return f"{where}: {first['msg']}"


class WebhookReceiver:
    """Turns one HTTP delivery into one queued task, or a precise 4xx/503."""

    def __init__(self, secret: str, guard: Coordination,
                 enqueue: Callable[[list[dict[str, Any]]], None], *, max_events: int,
                 model: Callable[[], str | None] = lambda: None) -> None:
        """``model``: the database's graph model (``tree``/``wiki``), or None while unknown (then
        events of either era are taken)."""
        self._webhook = Webhook(secret)
        self._guard, self._enqueue, self._max_events = guard, enqueue, max_events
        self._model = model

    def receive(self, body: bytes, headers: Mapping[str, str]) -> Reply:
        if len(body) > MAX_BODY_BYTES:
            return Reply(413, {"error": f"body larger than {MAX_BODY_BYTES} bytes"})
        try:  # Standard Webhooks signs text: a body that is not UTF-8 cannot be checked at all
            body.decode("utf-8")
        except UnicodeDecodeError as err:
            return Reply(400, {"error": f"the body is not UTF-8 text (byte {err.start}); events are "
                                        "JSON, which is"})
        try:
            self._webhook.verify(body, dict(headers), json_parse=False)
        except (WebhookVerificationError, ValueError) as err:
            return Reply(401, {"error": f"signature rejected: {err}"})
        parsed = self._parse(body)
        if isinstance(parsed, Reply):
            return parsed
        foreign = self._foreign(parsed)
        if foreign is not None:
            return foreign
        return self._deliver(headers["webhook-id"], parsed)

    def _foreign(self, events: list[dict[str, Any]]) -> Reply | None:
        """A 400 for the first event of the other era than the database's (service.note_event)."""
        model = self._model()
        if model is None:
            return None
        for index, event in enumerate(events):
            reason = foreign_to(model, event)
            if reason is not None:
                mine = "Doughnut 2025's" if model == "tree" else "today's Doughnut's"
                return Reply(400, {"error": f"events.{index}: {reason}; this database is {mine}"})
        return None

    def _parse(self, body: bytes) -> list[dict[str, Any]] | Reply:
        try:
            raw = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            return Reply(400, {"error": f"malformed JSON: {err}"})
        events = raw.get("events") if isinstance(raw, dict) else None
        if isinstance(events, list) and len(events) > self._max_events:
            return Reply(413, {"error": f"{len(events)} events; at most {self._max_events}"})
        try:
            payload = _Payload.model_validate(raw)
        except ValidationError as err:
            return Reply(400, {"error": _reason(err)})
        return [e.model_dump(mode="json", exclude_none=True) for e in payload.events]

    def _deliver(self, webhook_id: str, events: list[dict[str, Any]]) -> Reply:
        """Enqueue unless already seen; mark as seen only once enqueued, so nothing is lost.

        Two concurrent deliveries of one id may both be enqueued: processing is idempotent.
        """
        try:
            if self._guard.seen_delivery(webhook_id):
                return Reply(409, {"error": f"webhook {webhook_id[:64]!r} was already received"})
        except GraphRagError as err:
            return Reply(503, {"error": f"cannot check for replays: {err}"})
        try:
            self._enqueue(events)
        except EnqueueFailed as err:
            return Reply(503, {"error": f"cannot enqueue: {err}"})
        with contextlib.suppress(GraphRagError):  # enqueued: a later replay is merely redundant
            self._guard.claim_delivery(webhook_id, ttl_s=_REPLAY_WINDOW_S)
        return Reply(202, {"accepted": len(events)})
