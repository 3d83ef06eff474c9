"""The SIGKILL loop of the crash suites (issue 6, item 2).

:func:`_killed_stream` SIGKILLs the newest worker's process group again and again during a stream of
signed edits (ci 5 kills, full 50), every other kill while a drain of a running worker holds its
lock (mid-batch), the others at a random moment, and starts a new worker each time; it yields the
outcome (:class:`SigkillRun`) with the stack still running. :func:`_kills_happened` checks that the
kills went as planned; :func:`_nothing_lost_or_stale`, once the messages the killed workers
stranded came back (:func:`_recover`), that nothing is left dirty, queued or parked and no snapshot
is stale or missing. The workers run with :data:`CRASH_ENV` (test_crashes.py says why).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.reliability.edits import Doughnut, generated_rows
from tests.reliability.engines import Stranded
from tests.reliability.harness import (
    Stack,
    background,
    post_events,
    running_stack,
    unfinished_tasks,
)
from tests.reliability.support import figure, sized
from tests.support import drain_leases

DRAIN_LEASE_S = 15  # tasks/runtime.py Runtime.drain_lease_ms (not a setting)
CRASH_ENV = {"GRAPHRAG_STRATEGIES": "wavefront,layered", "GRAPHRAG_SEEDS": "0",
             "GRAPHRAG_LAYERED_LIMITS": "2500,5000", "GRAPHRAG_TASK_TIME_LIMIT_S": "50",
             "GRAPHRAG_VISIBILITY_TIMEOUT_S": "111"}


@dataclass
class KillLog:
    kills: int = 0
    mid_drain: int = 0
    in_flight: Counter[str] = field(default_factory=Counter)
    dirty_at_kill: int = 0
    last_kill: float = 0.0  # epoch seconds


def _kill_once(stack: Stack, rng: random.Random, *, wait_for_drain: bool, dead: set[bytes],
               log: KillLog) -> None:
    """Kill the current worker's process group: mid-drain (a drain of *this* worker holds a lease,
    i.e. one no killed worker held) or at a random moment; then start a new worker."""
    def tokens() -> set[bytes]:
        return drain_leases(stack.store.redis, stack.store.keys)

    def live_drain() -> bool:
        return bool(tokens() - dead) and stack.dirty.size() > 0

    worker = stack.workers.current
    if wait_for_drain:
        deadline = time.monotonic() + DRAIN_LEASE_S + 10
        while not live_drain() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.3))  # somewhere inside the batch
    else:
        time.sleep(rng.uniform(0.2, 2.5))
    held = tokens() - dead
    dirty = stack.dirty.size()
    worker.kill()
    log.last_kill = time.time()
    log.kills += 1
    log.dirty_at_kill += dirty
    log.in_flight.update(unfinished_tasks(worker.log()))
    if held:
        log.mid_drain += 1
        dead.update(held)
    stack.workers.start()


@dataclass
class SigkillRun:
    """The kill phase's outcome, kept (with its stack running) until the module ends."""

    stack: Stack
    log: KillLog
    sent: Counter[str]
    doughnut: Doughnut
    stranded: list[Stranded]  # taken by killed workers, not acknowledged, at the end of the kills
    kill_s: float
    errors: list[BaseException]


@contextlib.contextmanager
def _killed_stream(folder: Path, *, on: str, workers: int) -> Iterator[SigkillRun]:
    """Kill the newest worker's process group ``kills`` times during a stream of signed edits,
    every other kill while a drain holds a lock, and start a new worker each time (so ``workers``
    keep running); yield the outcome with the stack still running."""
    kills = sized(ci=5, full=50)
    rng = random.Random(7_000 + kills)
    rows = generated_rows(sized(ci=150, full=250), rng)
    with running_stack(folder, rows, CRASH_ENV, workers=workers, on=on) as stack:
        doughnut = Doughnut(stack.engine, rows, random.Random(11))
        sent: Counter[str] = Counter()

        def edit(stop: threading.Event) -> None:
            pace = random.Random(13)
            while not stop.is_set():
                events = [doughnut.edit() for _ in range(pace.choice((1, 1, 1, 2, 3)))]
                assert post_events(stack.http, events) == 202
                sent["events"] += len(events)
                sent["webhooks"] += 1
                time.sleep(pace.uniform(0.01, 0.06))

        log, dead = KillLog(), set[bytes]()
        started = time.perf_counter()
        with background(edit, name="editor") as errors:
            for k in range(kills):
                _kill_once(stack, rng, wait_for_drain=k % 2 == 0, dead=dead, log=log)
            time.sleep(1.0)  # the stream goes on into the last worker's life
        stranded = [m for m in stack.broker.unacked() if m.delivered_at <= log.last_kill]
        yield SigkillRun(stack, log, sent, doughnut, stranded,
                         time.perf_counter() - started, errors)


def _kills_happened(run: SigkillRun) -> None:
    """The kills happened as planned (figures printed and kept for the summary)."""
    kills, on = sized(ci=5, full=50), run.stack.on
    assert run.errors == [], f"the edit stream failed: {run.errors[0]!r}"
    summary = {
        "kills": run.log.kills, "kills mid-drain": run.log.mid_drain,
        "tasks in flight at the kills (received, not finished)": dict(run.log.in_flight),
        "dirty notes at the kills (sum)": run.log.dirty_at_kill, "events": run.sent["events"],
        "webhooks": run.sent["webhooks"], "edits": dict(run.doughnut.ops),
        "stranded (unacknowledged by killed workers)": dict(_by_task(run.stranded)),
        "kill phase seconds": round(run.kill_s),
    }
    print(f"\nsigkill ({on}):", summary)
    figure(f"sigkill ({on}): kills / mid-drain / events",
           f"{run.log.kills} / {run.log.mid_drain} / {run.sent['events']} "
           f"({run.sent['webhooks']} webhooks)")
    figure(f"sigkill ({on}): tasks in flight at the kills", dict(run.log.in_flight))
    figure(f"sigkill ({on}): messages stranded by the killed workers", dict(_by_task(run.stranded)))
    assert run.log.kills == kills
    assert run.log.mid_drain >= max(1, kills // 4), f"too few kills landed mid-drain: {summary}"


def _nothing_lost_or_stale(run: SigkillRun) -> None:
    """After the stranded messages came back: nothing dirty, queued or parked; none stale or missing."""
    stack = run.stack
    waited = _recover(run)
    settle_s = stack.settle(timeout_s=DRAIN_LEASE_S + sized(ci=120, full=480))
    report = stack.check()
    summary = {"stranded messages redelivered": dict(_by_task(run.stranded)),
               "seconds waited for them here": round(waited), "quiescence seconds": round(settle_s),
               "snapshots checked": report.checked, "stale": len(report.stale),
               "missing": len(report.missing)}
    print(f"\nafter the sigkills ({stack.on}):", summary)
    figure(f"sigkill ({stack.on}): snapshots checked / stale / missing (lost rebuilds)",
           f"{report.checked} / {len(report.stale)} / {len(report.missing)}")
    figure(f"sigkill ({stack.on}): seconds (kill phase, waiting for stranded messages, "
           "quiescence)", f"{run.kill_s:.0f}, {waited:.0f}, {settle_s:.0f}")
    assert stack.dirty.size() == 0
    assert stack.broker.backlog() == 0 and stack.broker.undeliverable() == 0
    assert report.bad == 0, report.summary(history=run.doughnut.history) + _task_errors(stack)


def _task_errors(stack: Stack) -> str:
    """The workers' log lines of tasks that raised and of notes whose rebuild failed (for a
    failure's message: what the workers say about work they may have dropped)."""
    lines = [line for worker in stack.workers.started for line in worker.log().splitlines()
             if "raised unexpected" in line or "rebuild of note" in line or "] failed" in line]
    return "\n  worker log lines about failed tasks: " + (
        "none" if not lines else "\n    ".join(["", *lines[-40:]]))


def _by_task(messages: list[Stranded]) -> Counter[str]:
    return Counter(m.task.removeprefix("graphrag.") for m in messages)


def _recover(run: SigkillRun) -> float:
    """Wait out the visibility timeout of what the killed workers stranded (if a periodic sweep
    has not returned it yet), then start one more worker: kombu returns expired unacknowledged
    messages at a worker's start. Returns the seconds waited."""
    stack = run.stack
    left = [m for m in stack.broker.unacked() if m.delivered_at <= run.log.last_kill]
    if not left:
        return 0.0
    visible_at = max(m.delivered_at for m in left) + stack.settings.visibility_timeout_s + 1
    waited = max(0.0, visible_at - time.time())
    time.sleep(waited)
    stack.workers.start()
    return waited
