"""A real Celery worker and ``graphrag serve`` for the HTTP and invalidation sections.

Both run as subprocesses in process groups of their own, started from the repository root with the
run's settings in their environment (every other ``GRAPHRAG_*``/``CELERY_*`` variable of the caller
is dropped, so a developer's shell cannot redirect them), and are stopped with SIGTERM, then
SIGKILL, of exactly those groups. Celery's broker is a Redis database of its own: the first empty one
of 15..8, claimed with a marker key (:func:`storage.redis.probe.claim_empty_database`) and flushed
at the end, so a benchmark never reads or drops another user's queues; or, for the RabbitMQ figures,
a private vhost on the local RabbitMQ (``rabbitmqctl``), deleted at the end.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx

from ops.bench.graph import Graph
from ops.bench.helpers import free_port, say, wait_for
from ops.bench.plan import MAX_TOKEN_LIMIT, ROOT, Bench, BenchError
from storage.redis import probe

__all__ = [
    "BROKER_DBS", "Services", "broker_idle", "claimed_broker", "credentials",
    "process_group", "says_ready", "service_env", "services", "stop_group", "worker_command",
]

BROKER_DBS = range(15, 7, -1)
CLAIM_KEY = "graphrag-bench:broker-claim"
QUEUES = ("realtime", "bulk")


@dataclass
class Services:
    """Where the started services listen, their credentials, whether their broker is idle."""

    base_url: str
    token: str
    secret: str
    idle: Callable[[], bool]
    prefix: str
    env: dict[str, str]
    #: the worker's Prometheus endpoint (``graphrag worker``'s, GRAPHRAG_WORKER_METRICS_PORT)
    worker_metrics_url: str = ""


def broker_idle(svc: Services) -> bool:
    """No message waits in (Redis: or is being worked on from) the worker's queues."""
    return svc.idle()


@contextlib.contextmanager
def redis_broker(redis_url: str) -> Iterator[tuple[str, Callable[[], bool]]]:
    """(broker URL, idle check) of a claimed Redis database."""
    with claimed_broker(redis_url) as broker:
        yield broker.url, lambda: probe.pending_messages(broker, QUEUES) == 0


def _rabbitmqctl(*args: str) -> None:
    try:
        subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        raise BenchError(f"rabbitmqctl {' '.join(args)} failed: {err}") from err


@contextlib.contextmanager
def rabbitmq_broker(amqp_url: str) -> Iterator[tuple[str, Callable[[], bool]]]:
    """(broker URL, idle check) of a private vhost on the RabbitMQ at ``amqp_url``."""
    from kombu.connection import Connection

    vhost = f"graphrag-bench-{uuid.uuid4().hex[:10]}"
    _rabbitmqctl("add_vhost", vhost)
    url = f"{amqp_url.rstrip('/')}/{vhost}"

    def idle() -> bool:
        with Connection(url) as conn:  # type: ignore[no-untyped-call]
            channel = conn.default_channel
            return all(channel.queue_declare(queue=q, passive=True).message_count == 0
                       for q in QUEUES)

    try:
        _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        yield url, idle
    finally:
        _rabbitmqctl("delete_vhost", vhost)


@contextlib.contextmanager
def claimed_broker(redis_url: str) -> Iterator[probe.ClaimedDatabase]:
    """The first empty Redis database of 15..8, claimed with a marker key; flushed afterwards."""
    claim = probe.claim_empty_database(redis_url, BROKER_DBS, marker=CLAIM_KEY)
    if claim is None:
        raise BenchError(f"no empty Redis database among {list(BROKER_DBS)} for the Celery broker")
    try:
        yield claim
    finally:
        probe.release_database(claim)


def _group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group this run started, then SIGKILL whatever is left."""
    for sig, wait_s in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
        if wait_for(lambda: not _group_alive(proc.pid), wait_s, 0.05):
            return


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@contextlib.contextmanager
def process_group(command: list[str], env: dict[str, str], log: Path,
                  ready: Callable[[], bool], what: str) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``command`` in a new session, wait (60 s) until ``ready``; stop its group at the end."""
    with log.open("ab") as out:
        proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        if not wait_for(lambda: ready() or proc.poll() is not None, 60, 0.1) or proc.poll() is not None:
            raise BenchError(f"{what} did not start:\n{_tail(log)}")
        yield proc
    finally:
        stop_group(proc)


def credentials() -> tuple[str, str]:
    """A fresh reader token and webhook secret for the processes of one run."""
    return f"bench-{uuid.uuid4().hex}", "whsec_" + base64.b64encode(os.urandom(24)).decode()


def _healthy(base_url: str) -> bool:
    try:
        return httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def service_env(bench: Bench, graph: Graph, broker_url: str, token: str, secret: str,
                prefix: str | None = None) -> dict[str, str]:
    # (a run may set the drains' batch and budget, to measure their trade-off: edit_floor records them)
    keep = {"GRAPHRAG_TIKTOKEN_FILE", "GRAPHRAG_DRAIN_BATCH", "GRAPHRAG_DRAIN_BUDGET_MS"}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GRAPHRAG_", "CELERY_")) or k in keep}
    env.update(GRAPHRAG_DATABASE_URL=graph.url, GRAPHRAG_REDIS_URL=bench.redis_url,
               GRAPHRAG_REDIS_PREFIX=prefix or bench.prefix("main"), CELERY_BROKER_URL=broker_url,
               GRAPHRAG_READER_TOKEN=token, GRAPHRAG_WEBHOOK_SECRET=secret,
               GRAPHRAG_STRATEGIES="wavefront", GRAPHRAG_MAX_TOKEN_LIMIT=str(MAX_TOKEN_LIMIT),
               GRAPHRAG_REDIS_CLUSTER=str(bench.redis_cluster).lower(), PYTHONUNBUFFERED="1")
    return env


def _graphrag() -> list[str]:
    script = Path(sys.executable).with_name("graphrag")
    return [str(script)] if script.exists() else [sys.executable, "-c",
                                                  "from worker.cli.main import main; main()"]


def _serve_command(port: int) -> list[str]:
    return [*_graphrag(), "serve", "--host", "127.0.0.1", "--port", str(port)]


def worker_command(bench: Bench, concurrency: int = 2, *, metrics: bool = False) -> list[str]:
    """Celery's worker command on the app; with ``metrics``, ``graphrag worker`` (the same worker,
    serving Prometheus metrics on the environment's GRAPHRAG_WORKER_METRICS_PORT)."""
    if metrics:
        return [*_graphrag(), "worker", "--concurrency", str(concurrency)]
    return [sys.executable, "-m", "celery", "-A", "worker.celery.app", "worker", "-Q", ",".join(QUEUES),
            "--concurrency", str(concurrency), "--loglevel=info", "--without-gossip",
            "--without-mingle", "--without-heartbeat", "-n", f"bench-{bench.run}-{concurrency}@%h"]


def says_ready(log: Path) -> bool:
    """Celery's worker logs "... ready." once it consumes."""
    return bool(re.search(r"\bready\.", log.read_text()))


@contextlib.contextmanager
def services(bench: Bench, graph: Graph, amqp_url: str | None = None) -> Iterator[Services]:
    """A Celery worker (2 processes, queues realtime and bulk) and ``graphrag serve`` on a free
    port, both on the graph's database and the run's ``<base>:main`` snapshots; the broker is a
    Redis database, or a RabbitMQ vhost when ``amqp_url`` is given."""
    token, secret = credentials()
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    broker = (rabbitmq_broker(amqp_url) if amqp_url
              else redis_broker(bench.broker_redis_url or bench.redis_url))
    with broker as (broker_url, idle), tempfile.TemporaryDirectory(prefix="graphrag-bench-") as tmp:
        env = service_env(bench, graph, broker_url, token, secret)
        log, metrics_port = Path(tmp) / "worker.log", free_port()
        with process_group(worker_command(bench, metrics=True),
                           {**env, "GRAPHRAG_WORKER_METRICS_PORT": str(metrics_port)}, log,
                           partial(says_ready, log), "the Celery worker"), \
                process_group(_serve_command(port), env, Path(tmp) / "serve.log",
                              lambda: _healthy(base_url), "graphrag serve"):
            say(f"Celery worker (2 processes, broker {broker_url.split(':', 1)[0]}) and graphrag "
                f"serve on port {port} are up")
            yield Services(base_url, token, secret, idle, bench.prefix("main"), env,
                           f"http://127.0.0.1:{metrics_port}/metrics")
