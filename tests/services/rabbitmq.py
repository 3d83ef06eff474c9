"""A private RabbitMQ virtual host per test (or session), created and deleted with ``rabbitmqctl``.

Everything a test declares (queues, exchanges, Celery's delayed-delivery topology, dead-letter
queues) lives in its own vhost, so deleting the vhost removes it all at once and tests never see each
other's messages. :func:`rabbitmq_vhost` checks the AMQP port first (a refused connection fails in
milliseconds with the address named), then runs ``rabbitmqctl add_vhost`` and ``set_permissions``
for the AMQP user, yields ``amqp://user:password@host:port/<vhost>``, and runs ``delete_vhost`` on exit.

Why ``rabbitmqctl`` and not the HTTP management API: the management plugin is optional and often
disabled, while ``rabbitmqctl`` ships with every server; each call
costs about 0.7 s (it boots a small Erlang VM), i.e. about 2 s of setup and teardown per vhost, so
share one vhost per module where tests allow. ``rabbitmqctl`` must be able to reach the node (same
host, readable Erlang cookie: run as root or as the ``rabbitmq`` user).

Environment: ``GRAPHRAG_TEST_AMQP_URL`` (default ``amqp://guest:guest@127.0.0.1:5672/``; its vhost is
ignored) and ``GRAPHRAG_TEST_RABBITMQCTL`` (default ``rabbitmqctl`` on ``PATH``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote, unquote, urlsplit

from tests.services import ServiceUnavailable

__all__ = ["AMQP_URL_ENV", "DEFAULT_AMQP_URL", "list_queues", "rabbitmq_vhost", "rabbitmqctl"]

AMQP_URL_ENV = "GRAPHRAG_TEST_AMQP_URL"
CTL_ENV = "GRAPHRAG_TEST_RABBITMQCTL"
DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
_CTL_TIMEOUT_S = 30.0


@contextmanager
def rabbitmq_vhost() -> Iterator[str]:
    """Create a fresh vhost the AMQP user may use fully; yield its amqp URL; delete it on exit."""
    base = urlsplit(os.environ.get(AMQP_URL_ENV, "").strip() or DEFAULT_AMQP_URL)
    host, port = base.hostname or "127.0.0.1", base.port or 5672
    user, password = base.username or "guest", base.password or "guest"
    _check_port(host, port)
    vhost = f"graphrag-test-{uuid.uuid4().hex[:10]}"
    rabbitmqctl("add_vhost", vhost)
    try:
        rabbitmqctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*")
        yield f"amqp://{quote(user, safe='')}:{quote(password, safe='')}@{host}:{port}/{vhost}"
    finally:
        rabbitmqctl("delete_vhost", vhost)


def rabbitmqctl(*args: str) -> str:
    """Run ``rabbitmqctl`` quietly; its stdout, or :class:`ServiceUnavailable` with its stderr."""
    ctl = os.environ.get(CTL_ENV, "").strip() or shutil.which("rabbitmqctl")
    if not ctl:
        raise ServiceUnavailable("rabbitmqctl is required to create a private RabbitMQ vhost but is "
                                 f"not on PATH; install RabbitMQ's CLI or set {CTL_ENV}.")
    try:
        done = subprocess.run([ctl, "-q", *args], capture_output=True, text=True,
                              timeout=_CTL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ServiceUnavailable(f"rabbitmqctl {' '.join(args)} failed: {err}") from err
    if done.returncode != 0:
        raise ServiceUnavailable(f"rabbitmqctl {' '.join(args)} failed (exit {done.returncode}): "
                                 f"{(done.stderr or done.stdout).strip()[-1500:]}")
    return done.stdout


def list_queues(amqp_url: str, *columns: str) -> dict[str, list[str]]:
    """``rabbitmqctl list_queues`` of the vhost in ``amqp_url``: each queue's name -> ``columns``."""
    vhost = unquote(urlsplit(amqp_url).path.lstrip("/"))
    out = rabbitmqctl("list_queues", "-p", vhost, "--no-table-headers", "name", *columns)
    rows = [line.split("\t") for line in out.splitlines() if line.strip()]
    return {row[0]: row[1:] for row in rows}


def _check_port(host: str, port: int) -> None:
    try:
        with socket.create_connection((host, port), timeout=2):
            return
    except OSError as err:
        raise ServiceUnavailable(
            f"RabbitMQ is required for these tests but nothing answers on {host}:{port} ({err}). "
            f"Start RabbitMQ or point {AMQP_URL_ENV} at a broker."
        ) from err
