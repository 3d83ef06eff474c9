"""What a task's message carries beside its arguments: headers every sender and the tasks agree on.

Headers, not arguments: a worker of an older version ignores a header it does not know, where an
argument it does not take would fail the task.
"""

from __future__ import annotations

__all__ = ["SENT_HEADER"]

#: When an events task was sent (wall-clock ms): the worker times its delivery from it.
SENT_HEADER = "graphrag_sent_ms"
