"""What a task's message carries beside its arguments, and how a drain is asked for: what every
sender (a worker's tasks, the webhook's process) and the tasks agree on.

Headers, not arguments: a worker of an older version ignores a header it does not know, where an
argument it does not take would fail the task. A drain is asked for under a *reason*, whose flag
(a short-lived key, ``DRAIN_FLAG_TTL_MS``) coalesces the drains asked for the same reason while one
is queued (tasks.jobs.schedule_drain); :func:`drain_options` is how its wait is expressed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONTINUED", "DRAIN_FLAG_TTL_MS", "DUE_HEADER", "EDITED", "JOIN", "RETRY", "SENT_HEADER",
           "SETTLE", "SWEEP", "drain_options"]

#: When an events task, or a drain that waits, was sent (wall-clock ms): the worker times the
#: events' delivery from it, and a drain counts its wait from it (tasks.jobs).
SENT_HEADER = "graphrag_sent_ms"
#: When an edit's drain was due (wall-clock ms: sent, plus its wait): the worker times the drain's
#: delivery from it.
DUE_HEADER = "graphrag_due_ms"
#: How long a drain's flag holds: longer than any drain waits in the queue before it starts.
DRAIN_FLAG_TTL_MS = 2_000
#: Why a drain is queued. Each reason coalesces only with itself (one flag each), so a drain queued
#: to retry in 0.2 s, or one queued at once to let an idle worker join in, never swallows the drain
#: an edit asks for: that one always runs once the edit's foci are settled; nor does a retry swallow
#: the drain queued for when the oldest waiting focus settles (``SETTLE``), which may be sooner. A
#: drain that wrote something and leaves settled foci behind queues its own successor
#: (``CONTINUED``, no flag), so each busy worker process keeps draining; only the drains an edit or
#: the sweep starts ask for another worker to join in.
EDITED, JOIN, RETRY, SETTLE, SWEEP, CONTINUED = (
    "drain", "drain:join", "drain:retry", "drain:settle", "drain:sweep", "drain:more")


def drain_options(reason: str, delay_s: float, *, subsecond_countdowns: bool,
                  now_ms: int) -> dict[str, Any]:
    """The options (``kwargs``, ``countdown``, ``headers``) that send a drain for ``reason`` to run
    in ``delay_s``: a countdown where the broker can express it, else a wait the task spends before
    it drains (under a second on RabbitMQ), counted from ``SENT_HEADER``; ``DUE_HEADER`` says when
    it is due either way. A retry (others held the settled foci, and queue their own successors)
    waits a whole second in such a broker rather than 0.2 s in a worker process, which it would
    keep from every other task meanwhile."""
    if reason == RETRY and not subsecond_countdowns and 0 < delay_s < 1:
        delay_s = 1.0
    flag: dict[str, Any] = {"flag": reason}
    headers = {DUE_HEADER: now_ms + round(delay_s * 1000)}
    if delay_s >= 1 or (delay_s > 0 and subsecond_countdowns):
        return {"kwargs": flag, "countdown": delay_s, "headers": headers}
    if delay_s > 0:
        return {"kwargs": {**flag, "wait_s": delay_s}, "headers": {**headers, SENT_HEADER: now_ms}}
    return {"kwargs": flag, "headers": headers}
