"""The focus-context strategy: Doughnut 2026's FocusContext as a pure, batched trace-then-cut.

``FocusContextRetrievalService.retrieve`` (Doughnut, commit b2c0268c09) walks the wiki-link graph from
a focus note under one combined token budget. Here the walk is split in two:

* :func:`trace` (a generator, driven by :func:`graphrag.core.batch.run_batch` or by hand) reads the graph
  through a :class:`~graphrag.wiki.view.WikiView` and records, in a JSON-storable
  :class:`~graphrag.wiki.focus.trace.Trace`, everything that any budget from 1 to the request's
  ``max_token_limit`` can use, and the facts it read;
* :func:`cut` replays Doughnut's greedy procedure on a trace for one budget, without the database.

``cut(trace sized for M, b)`` equals ``cut(trace sized for b, b)`` for every ``b <= M``, which is the
live computation at ``b``; :func:`focus_context` is that live computation.

Deliberate differences from Doughnut: a deleted or absent focus raises
:class:`~graphrag.core.errors.NoteNotFound` (Doughnut renders it); cross-depth duplicates are kept unless
``dedupe_across_depths`` is set (Doughnut keeps them).
"""

from __future__ import annotations

from collections.abc import Generator

from graphrag.wiki.focus.build import budget_bounds, trace
from graphrag.wiki.focus.cut import cut, cut_json, full_limit, shared_limit
from graphrag.wiki.focus.trace import Trace
from graphrag.wiki.focus.types import (
    FocusContextParams,
    FocusContextResult,
    FocusNoteOut,
    FocusRequest,
    NoteNotReadable,
    RelatedNoteOut,
    TraceTooSmall,
)
from graphrag.wiki.model import WikiNeed
from graphrag.wiki.view import WikiView

__all__ = [
    "FocusContextParams",
    "FocusContextResult",
    "FocusNoteOut",
    "FocusRequest",
    "NoteNotReadable",
    "RelatedNoteOut",
    "Trace",
    "TraceTooSmall",
    "budget_bounds",
    "cut",
    "cut_json",
    "focus_context",
    "full_limit",
    "shared_limit",
    "trace",
]


def focus_context(
    view: WikiView, params: FocusContextParams, request: FocusRequest
) -> Generator[WikiNeed, None, FocusContextResult]:
    """Trace the focus, then cut at ``request.token_limit``."""
    traced = yield from trace(view, params, request)
    return cut(traced, request.token_limit)
