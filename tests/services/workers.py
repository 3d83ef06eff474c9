"""Real Celery worker processes of :mod:`tests.services.amqp_app`, and the events they record.

:func:`celery_worker` runs ``python -m celery -A tests.services.amqp_app worker`` in a session of its
own (so teardown can signal the whole process group), with the app's settings in its environment; it
returns once the worker wrote its ``ready`` event, or fails with the worker's log tail if it exited
first. Teardown sends SIGQUIT (Celery's cold shutdown: unacked messages go back to the broker) to the
group, then SIGKILL after a grace period.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["Worker", "celery_worker", "events", "wait_until"]

ROOT = Path(__file__).resolve().parents[2]
_READY_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Worker:
    process: subprocess.Popen[bytes]
    events_path: Path
    log_path: Path

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""


def events(path: Path, kind: str = "ran") -> list[dict[str, Any]]:
    """The JSON events of ``kind`` that tasks appended to ``path`` (empty before the first)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row for row in rows if row["event"] == kind]


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}", pytrace=False)
        time.sleep(0.02)


@contextmanager
def celery_worker(directory: Path, env: dict[str, str], *, pool: str = "prefork",
                  name: str = "w") -> Iterator[Worker]:
    """A running worker whose tasks record to ``directory/events.jsonl``; stopped on exit."""
    worker = start_worker(directory, env, pool=pool, name=name)
    try:
        await_ready(worker, previous=0)
        yield worker
    finally:
        stop(worker.process)


def start_worker(directory: Path, env: dict[str, str], *, pool: str, name: str) -> Worker:
    """Start (without waiting) one worker process; its log goes to ``directory/<name>.log``."""
    events_path, log_path = directory / "events.jsonl", directory / f"{name}.log"
    full_env = {**os.environ, **env, "PROTO_EVENTS": str(events_path),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    argv = [sys.executable, "-m", "celery", "-A", "tests.services.amqp_app", "worker",
            "-P", pool, "-c", "1", "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h", "--without-gossip",
            "--without-mingle", "--without-heartbeat", "-l", "INFO"]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(argv, cwd=ROOT, env=full_env, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return Worker(process, events_path, log_path)


def await_ready(worker: Worker, previous: int) -> None:
    """Wait for the worker's ready event (the ``previous + 1``-th in the file). A worker may be
    ready and already dead (a task that kills it), so whether it exited is asked before the file
    is read: an exit seen there came after every event the file then shows."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while True:
        exited = worker.process.poll() is not None
        if len(events(worker.events_path, "ready")) > previous:
            return
        if exited or time.monotonic() > deadline:
            stop(worker.process)
            pytest.fail(f"the Celery worker did not become ready:\n{worker.log_tail()}", pytrace=False)
        time.sleep(0.05)


def stop(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    if process.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGQUIT)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
