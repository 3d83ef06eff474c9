"""What a process remembers about access, and until when: the access epoch.

Whom a Doughnut token names, and whether another viewer's answer is the owner's snapshot (or a
refusal), are decided by rows of ``user_token``, ``subscription``, ``circle_user``, ``ownership``,
``notebook`` and ``bazaar_notebook`` (service.users, service.viewers). Asking the database for them
on every read made every non-owner read cost several queries. So a process remembers each such
answer, and forgets it as soon as it may be wrong:

* **The epoch.** Change capture counts every committed transaction that changes a row of those
  tables, after it has read it from the binary log, in one counter in Redis (``graphrag cdc``:
  :func:`service.cdc.touches_access`). Each process reads the counter (a watcher thread, a few
  times a second) and files each answer under the epoch it read *before* asking the database. An
  answer is used only while the process's epoch is the one it was filed under: a revoked token, an
  ended subscription or a removed circle member is forgotten within the feed's lag plus one
  refresh of the watcher, never by a timer. (An answer asked while a change commits is filed under
  the epoch before it, which the change's bump then retires.)
* **Without change capture** nothing counts, so an answer is also forgotten ``ttl_ms`` after it
  was asked (``GRAPHRAG_TOKEN_CACHE_S``): the webhook path carries no access rows.
* What is remembered is a verdict about a snapshot *as stored* (its note, generation and time of
  computation are in the key), so a rebuilt snapshot is judged again; the rows the snapshot itself
  read outdate it as before (service.wiki_events).

:class:`Remembered` is that memo, bounded (the least recently used answer goes first); it does no
I/O: the epoch and the clock are callables.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Remembered"]

V = TypeVar("V")
_MAX_REMEMBERED = 10_000


class Remembered(Generic[V]):
    """Answers by key, each filed under the access epoch and time it was asked at (see the module
    docstring); ``ttl_ms`` None: kept while the epoch holds (change capture counts)."""

    def __init__(self, *, epoch: Callable[[], int], clock_ms: Callable[[], int],
                 ttl_ms: int | None, size: int = _MAX_REMEMBERED) -> None:
        self.epoch, self.clock_ms, self.ttl_ms, self.size = epoch, clock_ms, ttl_ms, size
        self._seen: OrderedDict[Hashable, tuple[int, int, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> tuple[bool, V | None]:
        """(whether ``key`` is remembered and still holds, its answer)."""
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None:
                self._seen.move_to_end(key)  # (the least recently used goes first)
        if seen is None or seen[0] != self.epoch():
            return False, None
        if self.ttl_ms is not None and self.clock_ms() - seen[1] >= self.ttl_ms:
            return False, None
        return True, seen[2]

    def put(self, key: Hashable, value: V, *, epoch: int, at_ms: int) -> None:
        """File ``value`` under ``epoch`` and ``at_ms``: what :meth:`epoch` and ``clock_ms`` said
        before the answer was asked."""
        with self._lock:
            self._seen[key] = (epoch, at_ms, value)
            self._seen.move_to_end(key)
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)

    def started(self) -> tuple[int, int]:
        """(the epoch, the time) to file an answer asked from now under."""
        return self.epoch(), self.clock_ms()
