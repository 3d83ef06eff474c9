"""Secrets (issue 6, item 5) never appear in output, logs or error bodies.

The CLI, the in-process HTTP app (caplog, captured stdout/stderr, every response) and a real
``graphrag serve`` process run with a database password, a Redis password, a broker password, the
reader token and the webhook secret while their database and Redis are unreachable (or the password
is wrong: the real MariaDB with the SELECT-only user of test_least_privilege.py, the real Redis),
and none of them may show up.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis
from fastapi.testclient import TestClient

from graphrag import GraphRagError
from storage.database import open_engine
from tests.conftest import url_string
from tests.ports import free_port
from tests.reliability.select_only_user import Restricted, redis_url
from tests.reliability.select_only_user import restricted as restricted  # a module fixture
from tests.reliability.support import ROOT, cli_env, graphrag, sized
from worker.http.server import build_http_app
from worker.settings import load_settings

pytestmark = pytest.mark.mariadb


# -- secrets ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Secrets:
    db_password: str
    redis_password: str
    broker_password: str
    token: str
    webhook_secret: str

    def all(self) -> list[str]:
        return [self.db_password, self.redis_password, self.broker_password, self.token,
                self.webhook_secret, self.webhook_secret.removeprefix("whsec_")]

    def env(self, **overrides: str) -> dict[str, str]:
        return {
            "GRAPHRAG_DATABASE_URL": f"mysql+pymysql://graphrag:{self.db_password}@127.0.0.1:1/x",
            "GRAPHRAG_REDIS_URL": f"redis://:{self.redis_password}@127.0.0.1:1/0",
            "CELERY_BROKER_URL": f"redis://:{self.broker_password}@127.0.0.1:1/1",
            "GRAPHRAG_READER_TOKEN": self.token,
            "GRAPHRAG_WEBHOOK_SECRET": self.webhook_secret,
            "GRAPHRAG_REDIS_TIMEOUT_MS": "200",
            # a reader that must answer while the database is down names its layout (README)
            "GRAPHRAG_SCHEMA": "doughnut-2025",
            **overrides,
        }

    def leaked(self, *texts: str | bytes) -> list[str]:
        joined = "\n".join(t.decode(errors="replace") if isinstance(t, bytes) else t for t in texts)
        return [s for s in self.all() if s in joined]


def make_secrets() -> Secrets:
    return Secrets(db_password=f"S3cretPw-{uuid.uuid4().hex[:12]}",
                   redis_password=f"RedisPw-{uuid.uuid4().hex[:12]}",
                   broker_password=f"BrokerPw-{uuid.uuid4().hex[:12]}",
                   token=f"tok-{uuid.uuid4().hex}",
                   webhook_secret="whsec_" + base64.b64encode(os.urandom(32)).decode())


SECRETS = make_secrets()
ALL_CLI_COMMANDS: dict[str, Any] = {
    "context-snapshot": ("context", "1"),
    "context-live": ("context", "1", "--live"),
    "rebuild-all": ("rebuild", "--all"),
    "db-init": ("db", "init"),
    "wrong-db-password": ("context", "1", "--live", "REAL_DB_WRONG_PASSWORD"),
    "wrong-redis-password": ("rebuild", "--status", "REAL_REDIS_WRONG_PASSWORD"),
    "rebuild-queue": pytest.param(("rebuild", "--all", "--queue")),
    # the full size also runs these
    "compare": ("compare", "1", "2"),
    "rebuild-ids": ("rebuild", "1"),
    "rebuild-status": ("rebuild", "--status"),
    "audit": ("audit", "--sample", "5"),
    "bad-setting": ("context", "1", "--live", "GRAPHRAG_MAX_TOKEN_LIMIT=lots"),
}
CLI_COMMANDS = dict(list(ALL_CLI_COMMANDS.items())[: sized(ci=7, full=len(ALL_CLI_COMMANDS))])


def _cli_case(value: Any) -> tuple[str, ...]:
    return tuple(value.values[0]) if hasattr(value, "values") else tuple(value)


@pytest.fixture(scope="module")
def cli_secret_runs(restricted: Restricted) -> dict[str, subprocess.CompletedProcess[bytes]]:
    """Every CLI command of CLI_COMMANDS with the secrets in its environment, two at a time."""
    real_db = url_string(restricted.url.set(password=SECRETS.db_password))
    real_redis = redis.connection.parse_url(redis_url())
    wrong_redis = (f"redis://graphrag:{SECRETS.redis_password}@{real_redis.get('host', '127.0.0.1')}:"
                   f"{real_redis.get('port', 6379)}/0")

    def run(args: tuple[str, ...]) -> subprocess.CompletedProcess[bytes]:
        overrides: dict[str, str] = {}
        command = []
        for arg in args:
            if arg == "REAL_DB_WRONG_PASSWORD":
                overrides["GRAPHRAG_DATABASE_URL"] = real_db
            elif arg == "REAL_REDIS_WRONG_PASSWORD":
                overrides["GRAPHRAG_REDIS_URL"] = wrong_redis
            elif "=" in arg:
                key, value = arg.split("=", 1)
                overrides[key] = value
            else:
                command.append(arg)
        return graphrag(*command, env=cli_env(**SECRETS.env(**overrides)), timeout_s=120)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run, _cli_case(v)) for name, v in CLI_COMMANDS.items()}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("name", [pytest.param(n, marks=v.marks if hasattr(v, "marks") else (), id=n)
                                  for n, v in CLI_COMMANDS.items()])
def test_cli_failures_never_show_secrets(
    cli_secret_runs: dict[str, subprocess.CompletedProcess[bytes]], name: str
) -> None:
    proc = cli_secret_runs[name]
    assert proc.returncode != 0, proc.stdout[:300]
    assert SECRETS.leaked(proc.stdout, proc.stderr) == [], proc.stderr.decode()[-2000:]
    if name == "wrong-db-password":
        assert "Access denied" in proc.stderr.decode()




@pytest.mark.parametrize("url", [
    "mysql+pymysql://graphrag:{pw}@127.0.0.1:notaport/x",
    "postgresql://graphrag:{pw}@127.0.0.1/x",
    "mysql+nosuchdriver://graphrag:{pw}@127.0.0.1/x",
], ids=["bad-port", "driver-not-installed", "unknown-driver"])
def test_a_malformed_database_url_does_not_echo_its_password(url: str) -> None:
    secret_url = url.format(pw=SECRETS.db_password)
    with pytest.raises(GraphRagError) as caught:
        open_engine(secret_url)
    assert SECRETS.db_password not in str(caught.value)
    proc = graphrag("context", "1", "--live", env=cli_env(GRAPHRAG_DATABASE_URL=secret_url))
    assert proc.returncode == 1
    assert SECRETS.leaked(proc.stdout, proc.stderr) == []


# -- the HTTP app ---------------------------------------------------------------------------------
def signed(body: bytes, secret: str, *, msg_id: str | None = None) -> dict[str, str]:
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    stamp = str(int(dt.datetime.now(dt.UTC).timestamp()))
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    return {"webhook-id": msg_id, "webhook-timestamp": stamp,
            "webhook-signature": "v1," + base64.b64encode(digest).decode(),
            "content-type": "application/json"}


EVENTS = b'{"events":[{"type":"note.updated","noteId":1,"occurredAt":"2026-01-01T00:00:00Z"}]}'
OTHER_SECRET = "whsec_" + base64.b64encode(b"another secret of 32 bytes......").decode()


def failing_requests(token: str, secret: str) -> list[tuple[str, str, dict[str, str], bytes, int]]:
    """(method, path, headers, body, expected status) while the database and Redis are down."""
    auth = {"Authorization": f"Bearer {token}"}
    return [
        ("GET", "/notes/1/graph", {}, b"", 401),
        ("GET", "/notes/1/graph", {"Authorization": f"Bearer {token}x"}, b"", 401),
        ("GET", "/api/notes/1/graph?tokenLimit=300", {"Authorization": "Bearer nope"}, b"", 401),
        ("GET", "/notes/1/graph", auth, b"", 503),
        ("GET", "/api/notes/1/graph?tokenLimit=300", auth, b"", 503),
        ("GET", "/notes/1/graph?seed=99", auth, b"", 400),
        ("GET", "/healthz", {}, b"", 503),
        ("GET", "/metrics", {}, b"", 200),
        ("POST", "/webhooks/note-events", {"content-type": "application/json"}, EVENTS, 401),
        ("POST", "/webhooks/note-events", signed(EVENTS, OTHER_SECRET), EVENTS, 401),
        ("POST", "/webhooks/note-events", signed(b"{", secret), b"{", 400),
        ("POST", "/webhooks/note-events", signed(EVENTS, secret), EVENTS, 503),
    ]


def test_the_http_app_never_shows_secrets(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str]
) -> None:
    for key in [k for k in os.environ if k.startswith(("GRAPHRAG_", "CELERY_"))]:
        if key != "GRAPHRAG_TIKTOKEN_FILE":
            monkeypatch.delenv(key)
    for key, value in SECRETS.env(GRAPHRAG_TOKEN_COUNTER="chars").items():
        monkeypatch.setenv(key, value)
    caplog.set_level(logging.DEBUG)
    app = build_http_app(load_settings())
    seen: list[str | bytes] = []
    with TestClient(app, raise_server_exceptions=False) as client:
        for method, path, headers, body, status in failing_requests(SECRETS.token,
                                                                    SECRETS.webhook_secret):
            response = client.request(method, path, headers=headers, content=body or None)
            assert response.status_code == status, (method, path, response.text[:300])
            seen += [response.content, str(response.headers)]
    out, err = capfd.readouterr()
    leaked = SECRETS.leaked(*seen, caplog.text, out, err)
    assert leaked == [], leaked
    assert caplog.records, "the failures were not logged at all"


def test_a_serving_process_never_shows_secrets() -> None:
    port = free_port()
    env = cli_env(**SECRETS.env(GRAPHRAG_TOKEN_COUNTER="chars", GRAPHRAG_ACCESS_LOG="true"))
    code = "from worker.cli.main import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, "serve", "--port", str(port)], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    bodies: list[str | bytes] = []
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                httpx.get(base + "/metrics", timeout=5)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()  # (still starting: its output ends once it is gone)
                    pytest.fail(f"graphrag serve did not start: {proc.communicate()[1][-2000:]!r}",
                                pytrace=False)
                time.sleep(0.1)
        with httpx.Client(base_url=base, timeout=30) as client:
            for method, path, headers, body, status in failing_requests(SECRETS.token,
                                                                        SECRETS.webhook_secret):
                response = client.request(method, path, headers=headers, content=body or None)
                assert response.status_code == status, (method, path, response.text[:300])
                bodies += [response.content, str(response.headers)]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert b"Traceback" not in err, err.decode()[-3000:]
    assert b"GET /notes/1/graph" in out + err, "no access log was captured"
    leaked = SECRETS.leaked(*bodies, out, err)
    assert leaked == [], leaked
