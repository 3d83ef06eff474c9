"""The bearer gate on its own, as ASGI: what passes unchecked, what is refused and how.

The reader's and the MCP server's own tests (test_http.py, test_mcp.py) check the gate in front of
each real app; these check the cases those apps cannot show (a websocket, the lifespan, a public
path next to a guarded one) against a recording app.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from worker.gate import BearerGate

TOKEN = "s3cret-token"


class Recorder:
    """An ASGI app that records the scopes it was given."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.seen.append(scope["type"])


def _call(gate: BearerGate, scope: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(gate(scope, receive, send))
    return sent


def _scope(kind: str, path: str, authorization: bytes | None = None) -> dict[str, Any]:
    headers = [] if authorization is None else [(b"authorization", authorization)]
    return {"type": kind, "path": path, "headers": headers}


def test_the_token_lets_a_request_through() -> None:
    app = Recorder()
    assert _call(BearerGate(app, token=TOKEN), _scope("http", "/x", f"Bearer {TOKEN}".encode())) == []
    assert app.seen == ["http"]


@pytest.mark.parametrize("authorization", [None, b"Bearer", f"Bearer {TOKEN}x".encode(),
                                           TOKEN.encode(), f"bearer {TOKEN}".encode()])
def test_a_request_without_the_token_gets_401_with_a_json_error(authorization: bytes | None) -> None:
    app = Recorder()
    start, body = _call(BearerGate(app, token=TOKEN), _scope("http", "/x", authorization))
    assert app.seen == []
    assert start["status"] == 401
    headers = dict(start["headers"])
    assert headers[b"www-authenticate"] == b"Bearer"
    assert headers[b"content-type"] == b"application/json"
    assert body["body"] == b'{"error":"missing or wrong bearer token"}'
    assert int(headers[b"content-length"]) == len(body["body"])


def test_public_paths_and_the_lifespan_pass_unchecked_and_nothing_else_does() -> None:
    app = Recorder()
    gate = BearerGate(app, token=TOKEN, public=["/healthz"])
    assert _call(gate, _scope("http", "/healthz")) == []
    assert _call(gate, {"type": "lifespan"}) == []
    assert _call(gate, _scope("http", "/healthz/")) != []  # only the exact path is public
    assert app.seen == ["http", "lifespan"]


def test_a_websocket_without_the_token_is_closed_without_being_accepted() -> None:
    app = Recorder()
    gate = BearerGate(app, token=TOKEN)
    assert _call(gate, _scope("websocket", "/mcp")) == []
    assert app.seen == []
    assert _call(gate, _scope("websocket", "/mcp", f"Bearer {TOKEN}".encode())) == []
    assert app.seen == ["websocket"]


def test_an_empty_token_is_refused_when_the_gate_is_built() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        BearerGate(Recorder(), token="")
