"""Carrying what one rebuild epoch loaded into the next, while no edit was recorded in between.

An epoch reads its foci's generation counters and the global edit ``seq`` before its first SQL
statement, and its writes are checked against them (service.rebuild, docs/redis.md). Every event
takes a new ``seq`` (stamping the edited notes) *before* it reads ``dep:`` or bumps a generation,
and so does the webhook's outdating. So when an epoch reads the same ``seq`` as the epoch that
first filled a workspace, no event was processed since that data was read: an edit committed in
the meantime is announced later, and its event bumps and dirties the affected foci then, exactly
as for data read just before the edit. Data loaded earlier under the same ``seq`` is therefore as
good as data this epoch would load, and the run of epochs behaves as one larger epoch: a monster
parent's children, a hub's referrers, rows and token costs are read once, not once per epoch (or
per drain batch of 100).

A carried workspace is dropped, and the next epoch starts a fresh one, when

* the ``seq`` moved (an event or an outdating happened);
* it served ``max_foci`` foci (its memory grows with what it loaded);
* ``max_age_ms`` passed since it was filled (by the worker's clock; a carry without one, for one
  rebuild call or for a full rebuild's pieces, is bounded by ``max_foci`` alone);
* an epoch using it failed, or it belongs to another service.

A full rebuild exists to recover changes no event announced, so it must read the database afresh:
it takes a new ``seq`` when a run starts (service.rebuild.start_full_rebuild), which ends every
carried workspace before its first piece is rebuilt. Its pieces then carry one workspace from
piece to piece under the same rule (service.full_rebuild), everything in it read after the run
started, with no age bound (a run recovers what was committed before it started; an edit committed
during it is its event's to announce, as for data read just before the edit) and a bound on foci
that is the process's memory bound (``GRAPHRAG_PIECE_CARRY_FOCI``). A drain
epoch that read ``seq`` just before that start may still write a focus after the run's page did,
with data up to ``max_age_ms`` old: the start also stamps the fact ``FULL_REBUILD``, which every
write checks with the stamps of the notes it shows, so that write is outdated at once and redone
from fresh data (service.rebuild, step 4).

On a read replica an old row read within the replica's lag would be carried on too: set
``GRAPHRAG_CARRY_FOCI=0`` and ``GRAPHRAG_PIECE_CARRY_FOCI=0`` there (ops/runbook.md, "Read-only
database user").

Each thread carries its own workspace (by thread id: a view is not safe to fill from two threads at
once; a thread that ended leaves its workspace to a later thread given its id, never to one alive
with it). A carry
with ``max_foci`` 0 holds nothing, and :meth:`Carry.release` lets every thread's workspace go (a
worker process that sat idle after a run, worker.celery.idle): the memory is the workspace's, and an
epoch already using one keeps it to its end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from service.context import ContextService

__all__ = ["MAX_AGE_MS", "MAX_FOCI", "Carry"]

MAX_FOCI = 5_000
MAX_AGE_MS = 30_000


@dataclass
class _Held:
    workspace: Any
    service: ContextService
    seq: int
    since_ms: int
    foci: int = 0


class Carry:
    """Hands the workspace of one epoch to the next while the edit ``seq`` stands still.

    ``clock_ms`` measures a workspace's age; without one (a carry that lives for one rebuild call)
    only ``max_foci`` bounds it. ``max_foci`` 0 never carries."""

    def __init__(self, *, max_foci: int = MAX_FOCI, max_age_ms: int = MAX_AGE_MS,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.max_foci, self.max_age_ms, self.clock_ms = max_foci, max_age_ms, clock_ms
        self._held: dict[int, _Held] = {}  # by thread; a dict, so release() reaches every thread

    def workspace(self, service: ContextService, *, seq: int, foci: int) -> Any:
        """The carried workspace if it may serve ``foci`` more foci of an epoch that read ``seq``;
        otherwise a fresh one from ``service``, carried from now on (unless ``max_foci`` is 0)."""
        if self.max_foci == 0:
            return service.costing()
        thread = threading.get_ident()
        held = self._held.get(thread)
        now_ms = self.clock_ms() if self.clock_ms is not None else 0
        if held is None or not self._fits(held, service, seq, now_ms, foci):
            held = self._held[thread] = _Held(service.costing(), service, seq, now_ms)
        held.foci += foci
        return held.workspace

    def _fits(self, held: _Held, service: ContextService, seq: int, now_ms: int, foci: int) -> bool:
        return (held.service is service and held.seq == seq
                and held.foci + foci <= self.max_foci
                and 0 <= now_ms - held.since_ms <= self.max_age_ms)

    def drop(self) -> None:
        """Forget this thread's workspace (an epoch using it failed)."""
        self._held.pop(threading.get_ident(), None)

    def release(self) -> None:
        """Forget every thread's workspace (safe from any thread: an epoch using one keeps it)."""
        self._held.clear()

    def holds(self) -> bool:
        """Whether any thread carries a workspace."""
        return bool(self._held)
