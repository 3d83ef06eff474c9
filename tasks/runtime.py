"""What the tasks work with, created once per worker process (after fork) by the composition root.

``worker`` registers a factory with :func:`configure`; :func:`current` builds the runtime lazily in
each process (so database engines and Redis clients are never shared across a fork).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from service.metrics import WorkMetrics
from service.ports import Coordination, DirtyQueue, NoteSource, ProgressLog, SnapshotCache
from service.rebuild import RebuildReport

__all__ = ["Runtime", "configure", "current"]


@dataclass(frozen=True)
class Runtime:
    """Clients and knobs of one worker process."""

    notes: NoteSource
    snapshots: SnapshotCache
    dirty: DirtyQueue
    coordination: Coordination
    progress: ProgressLog
    rebuild: Callable[[Iterable[int]], RebuildReport]
    #: a full rebuild's piece: its own notes loaded over the whole piece first (service.full_rebuild)
    rebuild_piece: Callable[[list[int]], RebuildReport]
    clock_ms: Callable[[], int]
    bulk_backlog: Callable[[], int]
    sibling_radius: int = 4
    drain_batch: int = 100
    debounce_ms: int = 50
    #: How long a drain task keeps its process (then the batch it is in): by default about one
    #: batch, so that events queued meanwhile (FIFO, ahead of the drain that re-queues itself) wait
    #: for about this, not for a hub's set (GRAPHRAG_DRAIN_BUDGET_MS).
    drain_budget_s: float = 0.25
    #: How long a drain's batch stays leased without renewal (a dead worker's, until takeable).
    drain_lease_ms: int = 15_000
    max_bulk_backlog: int = 20
    pages_per_dispatch: int = 50
    #: Note ids per drain epoch (its batches share loaded data).
    rebuild_page: int = 500
    #: Notes of one full-rebuild piece at most (one ``rebuild_piece`` task, its rows loaded first).
    rebuild_piece_notes: int = 5_000
    #: Whether the broker delays a message by less than a second (Redis: yes; RabbitMQ's native
    #: delayed delivery counts whole seconds, so a shorter wait happens inside the task).
    subsecond_countdowns: bool = True
    #: What this process counts (drains, rebuilds, dirty-to-fresh latency), made in the process
    #: itself after fork: under ``graphrag worker``'s metrics endpoint each pool process writes its
    #: own file, which the main process adds up at every scrape (worker.celery.metrics).
    metrics: WorkMetrics = field(default_factory=WorkMetrics.create)
    #: what a rebuild reads and computes, writing nothing: run before the process's first task
    rehearse: Callable[[], None] = lambda: None


_factory: Callable[[], Runtime] | None = None
_runtime: tuple[int, Runtime] | None = None


def configure(factory: Callable[[], Runtime]) -> None:
    """Register how a process builds its runtime (called by the composition root)."""
    global _factory, _runtime
    _factory, _runtime = factory, None


def current() -> Runtime:
    """This process's runtime, built on first use after a fork."""
    global _runtime
    if _runtime is None or _runtime[0] != os.getpid():
        if _factory is None:
            raise RuntimeError("tasks.runtime.configure() was not called by the worker")
        _runtime = (os.getpid(), _factory())
    return _runtime[1]
