"""End-to-end infrastructure: real MariaDB, real Redis, real Celery worker processes.

* MariaDB: a fresh, uniquely named database from :func:`tests.conftest.mariadb_database`, dropped
  afterwards (after every worker is stopped, so no pooled connection holds it).
* Redis (``GRAPHRAG_TEST_REDIS_URL``, default ``redis://127.0.0.1:6379/0``): snapshots live under a
  unique ``GRAPHRAG_REDIS_PREFIX`` and only those keys are deleted afterwards.
* The broker (``CELERY_BROKER_URL``): a whole Redis database number, because kombu's keys (queues,
  ``unacked``, bindings) carry no prefix. ``GRAPHRAG_TEST_BROKER_URL`` names one explicitly (then only
  kombu's own keys are deleted afterwards); otherwise the first *empty* database from 15 down to 8 is
  claimed with a marker key and flushed afterwards, while the marker is still ours. A database left
  behind by a killed run (its marker names a process of this host that is gone, or it holds only
  kombu's keys and no marker) is taken over: the take-over is a WATCH transaction on the marker.
* Workers: ``python -m celery -A worker.celery.app worker`` in a new session (process group) with the
  settings in its environment; teardown stops every worker started, also when a test failed.
* Webhook input (``test_webhook_*.py``): the real ASGI app from :func:`worker.http.app.create_app`
  under TestClient, enqueueing into a :class:`~tests.e2e.webhook_support.Recorder` and guarding
  replays on fakeredis (``server``, ``guard``, ``recorder``, ``client``); no worker.
* The running system of ``test_worker_e2e.py`` and ``test_worker_sigkill.py`` (``broker_url``,
  ``system``): one per test module and broker, described in :mod:`tests.e2e.worker_system`.

A missing MariaDB or Redis makes these tests fail with the URL named, never skip.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fakeredis
import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from storage.database import open_engine
from storage.profiles.admin_2025 import create_tables, insert_notes
from storage.redis.coordination import RedisCoordination
from tests.conftest import mariadb_database, url_string
from tests.e2e.webhook_support import MAX_EVENTS, SECRET, TOKEN, Recorder, coordination, reader_on
from tests.services.plugin import entered
from tests.services.rabbitmq import rabbitmq_vhost
from worker.compose import Wiring
from worker.http.app import create_app
from worker.http.server import build_http_app
from worker.http.webhook import WebhookReceiver
from worker.settings import load_settings

if TYPE_CHECKING:
    from tests.e2e.worker_system import System

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL_ENV = "GRAPHRAG_TEST_REDIS_URL"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
BROKER_URL_ENV = "GRAPHRAG_TEST_BROKER_URL"
BROKER_DBS = range(15, 7, -1)
CLAIM_KEY = "graphrag-e2e:broker-claim"
KOMBU_KEYS = ("realtime", "bulk", "unacked", "unacked_index", "unacked_mutex")

#: webhook-to-fresh latencies (seconds) measured by the tests, printed in the terminal summary
LATENCIES: list[float] = []
FIGURES: dict[str, str] = {}


def connect(url: str, what: str) -> redis.Redis:
    """A client on ``url`` that answered PING, or a test failure naming the URL."""
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as err:
        client.close()
        pytest.fail(f"Redis is required for the end-to-end tests but {what} at {url} is not usable "
                    f"({err.__class__.__name__}: {err}). Start Redis or set {REDIS_URL_ENV}.",
                    pytrace=False)
    return client


def redis_url() -> str:
    return os.environ.get(REDIS_URL_ENV, "").strip() or DEFAULT_REDIS_URL


@contextmanager
def broker_database(base_url: str) -> Iterator[str]:
    """A Redis URL whose database the broker may use alone; cleaned afterwards (see module doc)."""
    explicit = os.environ.get(BROKER_URL_ENV, "").strip()
    if explicit:
        client = connect(explicit, "the broker")
        try:
            yield explicit
        finally:
            for pattern in (*KOMBU_KEYS, "_kombu.binding.*"):
                for key in client.scan_iter(match=pattern, count=1000):
                    client.delete(key)
            client.close()
        return
    token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"
    base = redis.connection.parse_url(base_url)
    host, port = base.get("host", "127.0.0.1"), base.get("port", 6379)
    for db in BROKER_DBS:
        url = f"redis://{host}:{port}/{db}"
        client = connect(url, "the broker database")
        if _claim(client, token):
            break
        client.close()
    else:
        pytest.fail(f"no free Redis database among {list(BROKER_DBS)} for the broker (each holds "
                    f"other data or a running test's claim); set {BROKER_URL_ENV}", pytrace=False)
    try:
        yield url
    finally:
        if client.get(CLAIM_KEY) == token.encode():
            client.flushdb()
        client.close()


def _claim(client: redis.Redis, token: str) -> bool:
    """Whether ``token`` now holds this database alone: it was empty, or what it holds was left by
    a killed run (kombu's keys only, or the marker of a process of this host that is gone)."""
    if client.set(CLAIM_KEY, token, nx=True, ex=3600):
        if client.dbsize() == 1:
            return True
        if _leftovers_only(client):
            return _take_over(client, token.encode(), token)
        client.delete(CLAIM_KEY)
        return False
    holder = client.get(CLAIM_KEY)
    return holder is not None and _holder_gone(holder) and _take_over(client, holder, token)


def _take_over(client: redis.Redis, holder: bytes, token: str) -> bool:
    """Empty the database and mark it ``token``'s, unless the marker changed from ``holder``."""
    with client.pipeline() as pipe:
        try:
            pipe.watch(CLAIM_KEY)
            if pipe.get(CLAIM_KEY) != holder:
                return False
            pipe.multi()
            pipe.flushdb()
            pipe.set(CLAIM_KEY, token, ex=3600)
            pipe.execute()
        except redis.WatchError:
            return False
    return True


def _leftovers_only(client: redis.Redis) -> bool:
    """Whether the database holds only the claim and kombu's keys (queues, priority lanes included)."""
    ours = (CLAIM_KEY.encode(), b"_kombu.", *(k.encode() for k in KOMBU_KEYS))
    return all(key.startswith(ours) for key in client.scan_iter(count=1000))


def _holder_gone(holder: bytes) -> bool:
    host, _, rest = holder.decode(errors="replace").partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return not Path(f"/proc/{pid}").exists()


class Worker:
    """One ``celery -A worker.celery.app worker`` process group (``graphrag worker`` with ``cli``:
    what the compose file runs, with its metrics endpoint), logging to a file."""

    def __init__(self, env: dict[str, str], log_path: Path, *, concurrency: int = 2,
                 app: str = "worker.celery.app", queues: str = "realtime,bulk",
                 cli: bool = False) -> None:
        self.env, self.log_path = env, log_path
        self.name = f"e2e-{uuid.uuid4().hex[:8]}@%h"
        self.command = [
            sys.executable, "-m", "celery", "-A", app, "worker",
            f"--concurrency={concurrency}", "-Q", queues, "--loglevel=info",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", self.name,
        ]
        if cli:
            self.command = [sys.executable, "-c", "from worker.cli.main import main; main()", "worker",
                            f"--concurrency={concurrency}", f"--queues={queues}"]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, ready_within_s: float = 60) -> Worker:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.command, env=self.env, cwd=ROOT, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + ready_within_s
        while time.monotonic() < deadline:
            if re.search(r"\bready\.", self.log()):
                return self
            if self.proc.poll() is not None:
                pytest.fail(f"the worker exited with {self.proc.returncode}:\n{self.tail()}",
                            pytrace=False)
            time.sleep(0.1)
        pytest.fail(f"the worker was not ready within {ready_within_s} s:\n{self.tail()}", pytrace=False)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def count(self, pattern: str) -> int:
        return len(re.findall(pattern, self.log()))

    def kill(self) -> None:
        """SIGKILL the whole process group (main process and pool children) and reap it."""
        self._signal_group(signal.SIGKILL)
        self._reap(10)

    def stop(self) -> None:
        """Warm shutdown (SIGTERM), then SIGKILL whatever is left."""
        if self.proc is None:
            return
        self._signal_group(signal.SIGTERM)
        if not self._reap(20):
            self._signal_group(signal.SIGKILL)
            self._reap(10)

    def _signal_group(self, sig: int) -> None:
        assert self.proc is not None
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def _reap(self, timeout_s: float) -> bool:
        """Wait until the leader exited and no process of the group is left."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.05)
        return False


class Workers:
    """Starts workers and stops every one of them at teardown."""

    def __init__(self, env: dict[str, str], folder: Path, *, cli: bool = False) -> None:
        self.env, self.folder, self.cli = env, folder, cli
        self.started: list[Worker] = []

    def start(self) -> Worker:
        worker = Worker(self.env, self.folder / f"worker-{len(self.started)}.log", cli=self.cli)
        self.started.append(worker)
        return worker.start()

    @property
    def current(self) -> Worker:
        return self.started[-1]

    def stop_all(self) -> None:
        for worker in self.started:
            worker.stop()


def wait_until(check: Callable[[], Any], *, timeout_s: float, what: str,
               details: Callable[[], str] = lambda: "", interval_s: float = 0.02) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s} s: {what}\n{details()}", pytrace=False)
        time.sleep(interval_s)


def worker_env(settings_env: dict[str, str]) -> dict[str, str]:
    """This process's environment without any GRAPHRAG_/CELERY_ variable, plus ``settings_env``."""
    keep = {"GRAPHRAG_TIKTOKEN_FILE"}
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("GRAPHRAG_", "CELERY_")) and k not in keep)}
    env.update(settings_env)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not LATENCIES and not FIGURES:
        return
    terminalreporter.section("end-to-end figures")
    if LATENCIES:
        terminalreporter.write_line(
            f"webhook-to-fresh latency over {len(LATENCIES)} single edits: "
            f"p50 {percentile(LATENCIES, 0.5) * 1000:.0f} ms, "
            f"p95 {percentile(LATENCIES, 0.95) * 1000:.0f} ms, "
            f"max {max(LATENCIES) * 1000:.0f} ms"
        )
    for name, value in FIGURES.items():
        terminalreporter.write_line(f"{name}: {value}")


# -- webhook input (test_webhook_*.py) ------------------------------------------------------------
@pytest.fixture
def server() -> fakeredis.FakeServer:
    return fakeredis.FakeServer()


@pytest.fixture
def guard(server: fakeredis.FakeServer) -> RedisCoordination:
    return coordination(fakeredis.FakeRedis(server=server))


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def client(tmp_path: Path, guard: RedisCoordination, recorder: Recorder) -> Iterator[TestClient]:
    engine = open_engine(f"sqlite:///{tmp_path / 'notes.db'}")
    create_tables(engine)  # the webhook never reads it: the reader needs a service all the same
    reader = reader_on(engine, guard)
    receiver = WebhookReceiver(SECRET, guard, recorder, max_events=MAX_EVENTS)
    app = create_app(reader, reader_token=TOKEN, registry=CollectorRegistry(),
                     health=lambda: {"redis": "ok"}, webhook=receiver)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client
    engine.dispose()


# -- the running system (test_worker_e2e.py, test_worker_sigkill.py) --------------------------------
@pytest.fixture(scope="module", params=["redis", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def broker_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test of the running system runs once per broker: a Redis database of its own, or
    RabbitMQ in a private vhost (durable quorum queues, publisher confirms, a delivery limit)."""
    if request.param == "redis":
        with broker_database(redis_url()) as url:
            yield url
    else:
        yield from entered(rabbitmq_vhost)


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory, broker_url: str) -> Iterator[System]:
    # Imported here: tests.e2e.worker_system imports this module. Its SECRET and TOKEN are the
    # running system's, not the webhook tests'.
    from tests.e2e.worker_system import (
        LAYERED_LIMITS,
        SECRET,
        SEEDS,
        STRATEGIES,
        TOKEN,
        System,
        _full_rebuild,
        bulk_graph,
        hand_graph,
    )

    base_redis = redis_url()
    connect(base_redis, "the snapshot store").close()
    with mariadb_database() as db_url:
        database_url = url_string(db_url)
        engine = open_engine(database_url)
        create_tables(engine)
        insert_notes(engine, hand_graph().records() + bulk_graph().records())
        prefix = f"graphrag-e2e:{uuid.uuid4().hex}:v1"
        env = {
            "GRAPHRAG_DATABASE_URL": database_url, "GRAPHRAG_REDIS_URL": base_redis,
            "GRAPHRAG_REDIS_PREFIX": prefix, "CELERY_BROKER_URL": broker_url,
            "GRAPHRAG_WEBHOOK_SECRET": SECRET, "GRAPHRAG_READER_TOKEN": TOKEN,
            "GRAPHRAG_STRATEGIES": ",".join(STRATEGIES), "GRAPHRAG_SEEDS": ",".join(map(str, SEEDS)),
            "GRAPHRAG_LAYERED_LIMITS": ",".join(map(str, LAYERED_LIMITS)),
        }
        workers = Workers(worker_env(env), tmp_path_factory.mktemp("e2e-workers"))
        wiring: Wiring | None = None
        try:
            with pytest.MonkeyPatch.context() as mp:
                for key in [k for k in os.environ if k.startswith(("GRAPHRAG_", "CELERY_"))]:
                    if key != "GRAPHRAG_TIKTOKEN_FILE":
                        mp.delenv(key)
                for key, value in env.items():
                    mp.setenv(key, value)
                settings = load_settings()
                wiring = Wiring(settings)
                app = build_http_app(settings)
            _full_rebuild(wiring)
            workers.start()
            with TestClient(app, raise_server_exceptions=False) as http:
                yield System(settings, engine, wiring.cache, wiring.service, wiring.dirty, http,
                             workers, wiring)
        finally:
            workers.stop_all()
            if wiring is not None:
                client = wiring.client
                for key in client.scan_iter(match=f"{prefix}:*", count=1000):
                    client.delete(key)
                client.close()
                wiring.source.engine.dispose()  # type: ignore[attr-defined]
            engine.dispose()
