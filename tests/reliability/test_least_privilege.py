"""Least privilege and secrets (issue 6, item 5), against the real MariaDB (and Redis for the CLI).

* A MariaDB user with nothing but ``SELECT ON <db>.note`` (unique name, dropped afterwards) runs
  every read path: the schema check, paging, counting, the events' subtree and neighbour queries,
  every strategy (byte-identical to an all-privileges user), a rebuild into Redis (fakeredis
  in-process, the real Redis under a unique key prefix through the CLI), ``context``, ``compare``
  and ``audit``.
* Secrets never appear in output, logs or error bodies: the CLI, the in-process HTTP app (caplog,
  captured stdout/stderr, every response) and a real ``graphrag serve`` process run with a database
  password, a Redis password, a broker password, the reader token and the webhook secret while their
  database and Redis are unreachable (or the password is wrong), and none of them may show up.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import fakeredis
import httpx
import orjson
import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import SQLAlchemyError

from graphrag import (
    CharsCounter,
    GraphRagError,
    GraphView,
    Need,
    NoteNotFound,
    Request,
    StrategyParams,
    strategy_names,
)
from service.context import ContextService
from service.events import record_events
from service.note_event import NoteEvent
from service.rebuild import rebuild
from storage.database import open_engine
from storage.redis.cache import RedisCache as SnapshotStore
from storage.redis.queue import RedisDirtySet as DirtySet
from storage.sample import SAMPLE_FOCUS_IDS
from tests.conftest import mariadb_database, url_string
from tests.redis.readers import snapshot_of
from tests.reliability.support import (
    ROOT,
    check_result,
    cli_env,
    figure,
    graphrag,
    sample_rows,
    scale,
    sized,
)
from tests.wiring import NoteStore
from worker.server import build_http_app
from worker.settings import load_settings

STRATEGIES = strategy_names("tree")

pytestmark = pytest.mark.mariadb

SCALE = scale()  # GRAPHRAG_RELIABILITY_SCALE: "ci" (default) or "full"
NOW_MS = 1_767_225_600_000
LIVE_FOCI = [f for name, f in SAMPLE_FOCUS_IDS.items() if name != "deleted"]
#: how many live notes the in-process rebuild covers (the CLI rebuild always takes --all)
REBUILD_NOTES = sized(ci=120, full=10_000)
REDIS_URL_ENV = "GRAPHRAG_TEST_REDIS_URL"


def redis_url() -> str:
    return os.environ.get(REDIS_URL_ENV, "").strip() or "redis://127.0.0.1:6379/0"


# -- a SELECT-only user ---------------------------------------------------------------------------
@dataclass
class Restricted:
    admin: Engine
    engine: Engine
    url: URL
    user: str
    live_ids: list[int]

    def store(self) -> NoteStore:
        return NoteStore(self.engine)


@pytest.fixture(scope="module")
def restricted() -> Iterator[Restricted]:
    with mariadb_database() as url:
        admin = open_engine(url_string(url))
        notes = NoteStore(admin)
        notes.create_table()
        rows = sample_rows()
        notes.insert(rows)
        user, password = f"graphrag_ro_{uuid.uuid4().hex[:10]}", f"Ro-{uuid.uuid4().hex}"
        try:
            with admin.begin() as conn:
                conn.execute(text(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'"))
                conn.execute(text(f"GRANT SELECT ON `{url.database}`.`note` TO '{user}'@'%'"))
        except SQLAlchemyError as err:
            admin.dispose()
            pytest.fail(f"the MariaDB test user may not CREATE USER / GRANT: {err}", pytrace=False)
        ro_url = url.set(username=user, password=password)
        engine = open_engine(url_string(ro_url))
        live = sorted(r["id"] for r in rows if r["deleted_at"] is None)
        try:
            yield Restricted(admin, engine, ro_url, user, live)
        finally:
            engine.dispose()
            with admin.begin() as conn:
                conn.execute(text(f"DROP USER IF EXISTS '{user}'@'%'"))
            admin.dispose()


def test_the_user_may_only_select_from_note(restricted: Restricted) -> None:
    with restricted.engine.connect() as conn:
        grants = [row[0] for row in conn.execute(text("SHOW GRANTS"))]
        assert len(grants) == 2, grants
        assert grants[0].startswith("GRANT USAGE ON *.*"), grants
        assert grants[1].startswith(f"GRANT SELECT ON `{restricted.url.database}`.`note`"), grants
        assert conn.execute(text("SELECT COUNT(*) FROM note")).scalar_one() > 300
    forbidden = [
        "INSERT INTO note (id, topic_constructor, created_at) VALUES (99999, 'x', NOW())",
        "UPDATE note SET topic_constructor = 'x' WHERE id = 1",
        "DELETE FROM note WHERE id = 1",
        "CREATE TABLE probe (id INT)",
        "CREATE TEMPORARY TABLE probe (id INT)",
        "DROP TABLE note",
        "ALTER TABLE note ADD COLUMN probe INT",
    ]
    for statement in forbidden:
        with restricted.engine.connect() as conn, pytest.raises(SQLAlchemyError, match="denied"):
            conn.execute(text(statement))


def test_the_store_reads_with_select_only(restricted: Restricted) -> None:
    ro, admin = restricted.store(), NoteStore(restricted.admin)
    ro.check_schema()
    ro.ping()
    assert ro.any_note()
    assert ro.count_live() == admin.count_live() == len(restricted.live_ids)
    paged: list[int] = []
    while page := ro.live_ids_after(paged[-1] if paged else 0, 50):
        paged += page
    assert paged == restricted.live_ids
    roots = {SAMPLE_FOCUS_IDS["monster_parent"], SAMPLE_FOCUS_IDS["deleted"]}
    assert ro.edit_scope(roots) == admin.edit_scope(roots)
    views = []
    for store in (ro, admin):
        view = GraphView()
        need = Need(notes=frozenset(LIVE_FOCI), children=frozenset(LIVE_FOCI),
                    inbound=frozenset(LIVE_FOCI), ancestors=frozenset(LIVE_FOCI),
                    rows=frozenset(LIVE_FOCI))
        store.load(view, need)
        views.append([(view.note(i), view.children(i)) for i in LIVE_FOCI])
    assert views[0] == views[1]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_computes_the_same_with_select_only(
    restricted: Restricted, strategy: str
) -> None:
    ro = ContextService(restricted.store(), CharsCounter(), StrategyParams())
    admin = ContextService(NoteStore(restricted.admin), CharsCounter(), StrategyParams())
    requests = [Request(f, 0, 5000, NOW_MS, 5000) for f in LIVE_FOCI]
    for request in requests:
        ours = ro.compute(request, strategy).to_json()
        assert ours == admin.compute(request, strategy).to_json()
        check_result(ours, request.focus_id)
    batch = ro.compute_many(requests, strategy).results
    assert all(not isinstance(o, GraphRagError) for o in batch.values())
    with pytest.raises(NoteNotFound):
        ro.compute(Request(SAMPLE_FOCUS_IDS["deleted"], 0, 5000, NOW_MS), strategy)


def _event_stores() -> tuple[SnapshotStore, DirtySet]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    store = SnapshotStore(client, prefix=f"graphrag-lp:{uuid.uuid4().hex}:v1")
    return store, DirtySet(client, store.keys)


def test_events_resolve_with_select_only(restricted: Restricted) -> None:
    hub, parent = SAMPLE_FOCUS_IDS["hub"], SAMPLE_FOCUS_IDS["monster_parent"]
    events = [NoteEvent("note.updated", hub), NoteEvent("note.deleted", parent),
              NoteEvent("note.moved", SAMPLE_FOCUS_IDS["deep_leaf"], before_parent_id=parent,
                        after_parent_id=hub)]
    affected = []
    for notes in (restricted.store(), NoteStore(restricted.admin)):
        store, dirty = _event_stores()
        affected.append(record_events(events, notes, store, dirty, sibling_radius=2, now_ms=NOW_MS))
    assert affected[0] == affected[1] and {hub, parent} <= affected[0]


def test_a_rebuild_into_redis_works_with_select_only(restricted: Restricted) -> None:
    ids = [*restricted.live_ids[:REBUILD_NOTES], SAMPLE_FOCUS_IDS["deleted"]]
    store, _ = _event_stores()
    service = ContextService(restricted.store(), CharsCounter(), StrategyParams())
    started = time.perf_counter()
    report = rebuild(service, store, ids, strategies=STRATEGIES, seeds=(0,), max_token_limit=5000,
                     layered_limits=(2500, 5000), now_ms=NOW_MS)
    assert report.errors == {}, report.errors
    assert report.count == (len(ids) - 1) * 4  # wavefront, relationship-bfs, layered x 2 limits
    admin = ContextService(NoteStore(restricted.admin), CharsCounter(), StrategyParams())
    for focus in ids[:: max(1, len(ids) // 10)][:-1] or ids[:1]:
        env = snapshot_of(store, focus, "wavefront", 0)
        assert env is not None, focus
        expected = admin.compute(Request(focus, 0, 5000, NOW_MS, 5000), "wavefront")
        assert orjson.dumps(env.result) == expected.to_json()
    assert snapshot_of(store, SAMPLE_FOCUS_IDS["deleted"], "wavefront", 0) is None
    figure("SELECT-only rebuild (in-process)",
           f"{report.count} snapshots of {len(ids) - 1} notes in {time.perf_counter() - started:.1f} s")


@pytest.mark.redis
def test_the_cli_reads_and_rebuilds_with_select_only(restricted: Restricted) -> None:
    prefix = f"graphrag-reliability:{uuid.uuid4().hex}:v1"
    password = restricted.url.password
    assert password
    env = cli_env(GRAPHRAG_DATABASE_URL=url_string(restricted.url), GRAPHRAG_REDIS_URL=redis_url(),
                  GRAPHRAG_REDIS_PREFIX=prefix, GRAPHRAG_REDIS_TIMEOUT_MS="2000",
                  GRAPHRAG_STRATEGIES="wavefront,layered,relationship-bfs",
                  GRAPHRAG_TOKEN_COUNTER="chars")
    client = redis.Redis.from_url(redis_url(), socket_timeout=5)
    hub = str(SAMPLE_FOCUS_IDS["hub"])
    try:
        built = graphrag("rebuild", "--all", env=env, timeout_s=300)
        assert built.returncode == 0, built.stderr.decode()[-2000:]
        assert "0 errors" in built.stderr.decode()
        reads = {
            "snapshot": ("context", hub),
            "live": ("context", hub, "--live"),
            "compare": ("compare", hub, str(SAMPLE_FOCUS_IDS["link_note"]), "--format", "json"),
            "audit": ("audit", "--sample", "20"),
        }
        with ThreadPoolExecutor(max_workers=2) as pool:
            runs = {name: pool.submit(graphrag, *args, env=env) for name, args in reads.items()}
            done = {name: run.result() for name, run in runs.items()}
        for name, proc in done.items():
            assert proc.returncode == 0, (name, proc.stderr.decode()[-2000:])
        check_result(done["snapshot"].stdout.strip(), int(hub))
        check_result(done["live"].stdout.strip(), int(hub))
        assert "sampled 20 snapshots" in done["audit"].stdout.decode()
        for proc in [built, *done.values()]:
            assert password not in (proc.stdout + proc.stderr).decode(errors="replace")
        assert client.exists(f"{prefix}:snap:{{{hub}}}:layered:0:2500")
    finally:
        stale = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if stale:
            client.delete(*stale)
        client.close()


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_serving_process_never_shows_secrets() -> None:
    port = _free_port()
    env = cli_env(**SECRETS.env(GRAPHRAG_TOKEN_COUNTER="chars"))
    code = "from worker.cli import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, "serve", "--port", str(port)], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    bodies: list[str | bytes] = []
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(base + "/metrics", timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
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
