"""``graphrag context NOTE_ID --follow``: the context printed again each time its bytes change.

Fast: :func:`worker.cli.follow.follow` over the in-memory change announcements. End to end: the
installed command against the sample database and the real Redis, a rebuild that writes the same
bytes (nothing printed) and one after a SQL edit (the new context printed), then Ctrl-C or SIGTERM
(exit 0, no traceback).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from typing import IO

import pytest
from sqlalchemy import create_engine, text

from storage.memory import MemoryState
from storage.memory_changes import MemoryChanges
from storage.sample import SAMPLE_FOCUS_IDS
from tests.mcp_support import GRAPHRAG, ROOT, Service
from worker.cli.follow import follow

NOTE = SAMPLE_FOCUS_IDS["link_note"]


def test_follow_yields_only_changed_versions() -> None:
    state = MemoryState()
    reads: list[bytes] = []

    def read() -> bytes:
        reads.append([b"v1", b"v1", b"v2"][len(reads)])
        if len(reads) == 2:  # the watch's own report read the same bytes; then two writes land
            state.announce(6)  # another note: not read again
            state.announce(5)
        return reads[-1]

    seen = follow(read, MemoryChanges(state).listener(), 5)
    assert next(seen) == b"v1"
    assert next(seen) == b"v2"
    assert reads == [b"v1", b"v1", b"v2"]


def _lines(stream: IO[bytes] | None) -> queue.Queue[bytes]:
    """The stream's lines as they come (read on a thread, so the process never blocks on a full
    pipe)."""
    lines: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        assert stream is not None
        for line in stream:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _drained(lines: queue.Queue[bytes]) -> bytes:
    out = b""
    while not lines.empty():
        out += lines.get()
    return out


Following = tuple[subprocess.Popen[bytes], queue.Queue[bytes], queue.Queue[bytes]]


@pytest.fixture
def following(svc: Service) -> Iterator[Following]:
    svc.rebuild(NOTE)
    proc = subprocess.Popen([GRAPHRAG, "context", str(NOTE), "--follow"], cwd=ROOT,
                            env={**svc.environ, "PATH": os.environ.get("PATH", "")},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        yield proc, _lines(proc.stdout), _lines(proc.stderr)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


@pytest.mark.redis
@pytest.mark.usefixtures("no_inherited_settings")
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_context_follow_prints_each_change_once(
    svc: Service, following: Following, stop: signal.Signals
) -> None:
    proc, lines, errors = following
    first = lines.get(timeout=60)
    assert first == svc.graph(NOTE, svc.settings.max_token_limit).content + b"\n"
    svc.rebuild(NOTE)  # the same bytes again
    with pytest.raises(queue.Empty):
        lines.get(timeout=2.0)
    engine = create_engine(svc.settings.database_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE note SET topic_constructor = :title WHERE id = :id"),
                     {"title": f"Followed {stop.name}", "id": NOTE})
    engine.dispose()
    svc.rebuild(NOTE)
    second = lines.get(timeout=30)
    assert f'"Followed {stop.name}'.encode() in second and second != first
    proc.send_signal(stop)
    try:
        assert proc.wait(30) == 0
    except subprocess.TimeoutExpired as err:
        raise AssertionError(f"still running; stderr: {_drained(errors)[-3000:]!r}") from err
    said = _drained(errors)
    assert b"Traceback" not in said and b"-- the context of note" in said
