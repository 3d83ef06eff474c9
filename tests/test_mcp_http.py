"""``graphrag mcp --transport http``: streamable HTTP behind the reader's bearer token.

Without ``GRAPHRAG_READER_TOKEN`` the server refuses to start. Started (a subprocess on the bundled
sample notebook in SQLite and the real Redis), it answers 401 to a missing or wrong token on every
path, and with the token it answers exactly like the HTTP reader, refusals included; an MCP client
holding a wrong token cannot connect.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tests.mcp_support import (
    GRAPHRAG,
    NOTES,
    ROOT,
    TOKEN,
    HttpServer,
    Service,
    _wait_listening,
    assert_refusals,
    assert_same_as_http,
    assert_tools_listed,
    over_http,
    run,
    service_on,
)
from tests.ports import free_port

pytestmark = [pytest.mark.redis, pytest.mark.usefixtures("no_inherited_settings")]


def test_http_transport_needs_the_reader_token(svc: Service) -> None:
    environ = {k: v for k, v in svc.environ.items() if k != "GRAPHRAG_READER_TOKEN"}
    done = subprocess.run([GRAPHRAG, "mcp", "--transport", "http"],
                          capture_output=True, timeout=60, cwd=ROOT,
                          env={**environ, "PATH": os.environ.get("PATH", "")})
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode().strip().splitlines() == [
        "error: GRAPHRAG_READER_TOKEN must be set to serve MCP over HTTP"]


@pytest.fixture(scope="module")
def mcp_http(sample_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    port = free_port()
    with service_on(sample_url) as svc, (tmp_path_factory.mktemp("mcp-http") / "log").open("w") as log:
        proc = subprocess.Popen(
            [GRAPHRAG, "mcp", "--transport", "http", "--port", str(port)],
            cwd=ROOT, env={**svc.environ, "PATH": os.environ.get("PATH", "")},
            stdout=log, stderr=log)
        try:
            _wait_listening(proc, port)
            yield HttpServer(svc, f"http://127.0.0.1:{port}/mcp")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("authorization", [
    None, "Bearer wrong", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", TOKEN, f"Basic {TOKEN}", "Bearer",
    f"bearer {TOKEN}", f"Bearer  {TOKEN}",
])
def test_http_refuses_a_missing_or_wrong_bearer_token(
    mcp_http: HttpServer, authorization: str | None
) -> None:
    headers = dict(MCP_HEADERS) | ({} if authorization is None else {"Authorization": authorization})
    for method, url in (("POST", mcp_http.url), ("GET", mcp_http.url),
                        ("GET", mcp_http.url.replace("/mcp", "/elsewhere"))):
        response = httpx.request(method, url, json=INITIALIZE if method == "POST" else None,
                                 headers=headers, timeout=30)
        assert response.status_code == 401, (method, url)
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert response.json() == {"error": "missing or wrong bearer token"}
    accepted = httpx.post(mcp_http.url, json=INITIALIZE, timeout=30,
                          headers={**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"})
    assert accepted.status_code == 200 and accepted.json()["id"] == 1


def test_http_with_the_token_answers_like_the_http_reader(mcp_http: HttpServer) -> None:
    svc = mcp_http.svc
    svc.rebuild(*NOTES)

    async def scenario() -> None:
        async with over_http(mcp_http, TOKEN) as client:
            await assert_tools_listed(client)
            for note in NOTES:
                for limit in (6, 1200):
                    await assert_same_as_http(client, svc, note, limit)
            await assert_refusals(client, svc)

    run(scenario)


def _chain(err: BaseException) -> Iterator[BaseException]:
    yield err
    for inner in getattr(err, "exceptions", ()):
        yield from _chain(inner)


def test_an_mcp_client_with_a_wrong_token_cannot_connect(mcp_http: HttpServer) -> None:
    statuses: list[int] = []

    async def scenario() -> None:
        async with over_http(mcp_http, "wrong", statuses) as client:
            await client.list_tools()

    with pytest.raises(BaseException) as caught:  # the SDK wraps its MCPError in task groups
        run(scenario)
    assert any(isinstance(err, MCPError) for err in _chain(caught.value)), caught.value
    assert statuses and set(statuses) == {401}
