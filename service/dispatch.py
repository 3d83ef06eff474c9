"""The nightly full rebuild's dispatcher: page live note ids by key and hand out rebuild batches.

Keyset paging (``id > last ORDER BY id LIMIT n``), never OFFSET, so a page costs the same at any depth
and notes created meanwhile are still visited. Back-pressure: while more than ``max_backlog``
batches wait on the bulk queue the dispatcher stops and asks to be called again later, so a full
rebuild never floods the broker. Progress is recorded per page, so ``graphrag rebuild --status``
follows it and a dispatcher that died resumes from the last recorded id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from service.ports import NoteSource, ProgressLog

__all__ = ["DispatchStep", "dispatch_pages"]


@dataclass(frozen=True, slots=True)
class DispatchStep:
    """Where a dispatch call stopped: ``finished`` (no ids left), ``waiting`` (back-pressure) or
    ``more`` (its page quota is spent); ``after_id`` is the keyset position to continue from."""

    state: Literal["finished", "waiting", "more"]
    after_id: int


def dispatch_pages(
    source: NoteSource, progress: ProgressLog, *, run_id: str, after_id: int, pages: int,
    page_size: int, backlog: Callable[[], int], max_backlog: int,
    enqueue: Callable[[list[int]], object], now_ms: Callable[[], int],
) -> DispatchStep:
    """Enqueue up to ``pages`` pages of live ids after ``after_id``; see the module docstring."""
    for _ in range(pages):
        if backlog() > max_backlog:
            return DispatchStep("waiting", after_id)
        ids = source.live_ids_after(after_id, page_size)
        if not ids:
            progress.dispatched(run_id, now_ms=now_ms())
            return DispatchStep("finished", after_id)
        enqueue(ids)
        after_id = ids[-1]
        progress.enqueued(run_id, len(ids), last_id=after_id)
    return DispatchStep("more", after_id)
