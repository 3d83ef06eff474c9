"""What a task's message carries beside its arguments: headers every sender and the tasks agree on.

Headers, not arguments: a worker of an older version ignores a header it does not know, where an
argument it does not take would fail the task.
"""

from __future__ import annotations

__all__ = ["SENT_HEADER"]

#: When an events task, or a drain that waits, was sent (wall-clock ms): the worker times the
#: events' delivery from it, and a drain counts its wait from it (tasks.jobs).
SENT_HEADER = "graphrag_sent_ms"
