"""Refreshing stale snapshots in the background of the HTTP process.

The reader claims one refresh per note at a time (an expiring Redis marker) and hands the note id to
:class:`BackgroundRefresher`, which rebuilds it on one worker thread and releases the claim.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from graphrag import GraphRagError
from service.drain import requeue
from service.ports import Coordination, DirtyQueue
from service.rebuild import RebuildReport
from worker.compose import wall_ms

__all__ = ["BackgroundRefresher"]

log = logging.getLogger("graphrag.refresh")


class BackgroundRefresher:
    """Callable ``(note_id) -> None`` that queues a rebuild of the note on a background thread."""

    def __init__(self, rebuild_one: Callable[[int], object], coordination: Coordination,
                 dirty: DirtyQueue) -> None:
        self._rebuild_one, self._coordination, self._dirty = rebuild_one, coordination, dirty
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphrag-refresh")

    def __call__(self, note_id: int) -> None:
        self._executor.submit(self._refresh, note_id)

    def _refresh(self, note_id: int) -> None:
        try:
            report = self._rebuild_one(note_id)
            if isinstance(report, RebuildReport):
                # an edit raced the refresh: the workers redo it from the dirty set
                requeue(self._dirty, report.requeue, now_ms=wall_ms())
        except GraphRagError as err:
            log.warning("refresh of note %s failed: %s", note_id, err)
        finally:
            try:
                self._coordination.release_refresh(note_id)
            except GraphRagError as err:
                log.warning("could not release the refresh claim of note %s: %s", note_id, err)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)
