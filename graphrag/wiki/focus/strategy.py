"""The focus-context strategy as the registry sees it: Doughnut 2026's FocusContext.

:func:`focus_context_run` adapts a :class:`graphrag.core.params.Request` to the trace-then-cut algorithm
of :mod:`graphrag.wiki.focus.context` and returns a :class:`WikiOutcome`: the trace (budget-independent,
sized for the request's traversal limit, so one stored trace answers every tokenLimit up to it), the
result cut at the request's tokenLimit, and the facts the trace read (the reverse index of exact
invalidation, docs/algorithms.md "Focus context"). Its smaller tokenLimits are answered by replaying
the cut on the stored trace (the registry's ``trace`` mode).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from graphrag.core.params import Request
from graphrag.core.strategy import Strategy
from graphrag.wiki.focus.context import (
    FocusContextParams,
    FocusContextResult,
    FocusRequest,
    Trace,
    cut,
    cut_json,
    shared_limit,
    trace,
)
from graphrag.wiki.focus.render import markdown_json, render_markdown, result_json
from graphrag.wiki.model import WikiNeed
from graphrag.wiki.view import WikiView

__all__ = ["STRATEGY", "WikiOutcome", "WikiWorkspace", "focus_context_run", "replay", "replay_json",
           "shared_limit"]


@dataclass
class WikiWorkspace:
    """What a batch of wiki computations shares: one view of the loaded graph."""

    view: WikiView


@dataclass(frozen=True)
class WikiOutcome:
    """A focus-context computation: its trace and the result at the requested tokenLimit."""

    trace: Trace
    result: FocusContextResult
    max_depth: int

    def to_json(self) -> bytes:
        """Doughnut's ``FocusContextResult`` bytes."""
        return result_json(self.result)

    def markdown(self) -> str:
        """Doughnut's ``ai-context-markdown`` text."""
        return render_markdown(self.result, self.max_depth)

    def markdown_json(self) -> bytes:
        """``{"markdown": ...}`` as Doughnut's ``/ai-context-markdown`` answers."""
        return markdown_json(self.markdown())

    def depends_on(self, view: Any = None) -> frozenset[str]:
        """The facts the trace read (``note:X``, ``links:P``, ``inbound:T``, ``peers:...``, ...)."""
        return frozenset(self.trace.facts)


def _request(request: Request, params: FocusContextParams) -> FocusRequest:
    return FocusRequest(request.focus_id, request.seed, request.token_limit,
                        max(request.token_limit, request.sizing_limit), request.viewer,
                        request.max_depth, request.read_deleted)


def focus_context_run(
    workspace: WikiWorkspace, params: FocusContextParams, request: Request
) -> Generator[WikiNeed, None, WikiOutcome]:
    """Trace for every tokenLimit up to the request's traversal limit, then cut at its tokenLimit."""
    focus_request = _request(request, params)
    traced = yield from trace(workspace.view, params, focus_request)
    return WikiOutcome(traced, cut(traced, request.token_limit), focus_request.depth(params))


def replay(stored: Trace, token_limit: int) -> WikiOutcome:
    """The outcome at ``token_limit`` from a stored trace, without the database."""
    return WikiOutcome(stored, cut(stored, token_limit), stored.max_depth)


def replay_json(stored: Trace, token_limit: int) -> bytes:
    """``replay(stored, token_limit).to_json()``, joined from the stored notes' fragments."""
    return cut_json(stored, token_limit)


STRATEGY = Strategy(
    name="focus-context", version=1, model="wiki", limits="trace", params=FocusContextParams(),
    run=focus_context_run, sibling_radius=0, default_token_limit=2000, least_traced_limit=20_000,
    description="Doughnut 2026's FocusContext: wiki links to depth 2 and folder peers under one "
                "combined budget, byte for byte (the default on today's Doughnut)",
)
