"""Live computation: a batch of requests through the pure algorithms, data from a note source.

One batch shares one workspace (the view and the costing memo of its graph model) and one loader
on one database connection, so a batch of 100 foci costs a handful of IN statements per round
(docs/architecture.md, "Batched reads"). A strategy is computed only on a source of the graph
model it declares; anything else is a one-line error naming both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from graphrag import (
    Costing,
    GraphRagError,
    GraphView,
    InvalidParameter,
    Request,
    StrategyParams,
    TokenCounter,
    computation,
    get_strategy,
    run_batch,
)
from graphrag.tree.preload import preload_rounds as tree_preload
from graphrag.wiki.focus.strategy import WikiWorkspace
from graphrag.wiki.preload import preload_rounds as wiki_preload
from graphrag.wiki.view import WikiView
from service.ports import NoteSource

__all__ = ["Computed", "ContextService", "require_model"]


@dataclass(frozen=True)
class Computed:
    """A batch's outcomes (or per-note errors) and the view they were computed from."""

    view: Any
    results: dict[Request, Any]


def require_model(strategy: str, source: NoteSource) -> None:
    """Raise InvalidParameter when ``strategy`` needs another graph model than ``source`` yields."""
    spec = get_strategy(strategy)
    if spec.model != source.model:
        raise InvalidParameter(
            "strategy", f"strategy {strategy!r} needs the {spec.model} model of notes; this database "
            f"({source.profile}) has the {source.model} model"
        )


class ContextService:
    """Computes contexts for batches of focus notes with one set of IN queries per round."""

    def __init__(self, store: NoteSource, counter: TokenCounter, params: StrategyParams, *,
                 database: Callable[[], str] = lambda: "",
                 stamp: Callable[[], str] | None = None) -> None:
        """``database`` gives the digest of the database the snapshots come from, expected on every
        one served; ``stamp`` (by default the same) the one stamped on every one written, which
        is confirmed, never a provisional guess, and raises when it cannot be told
        (service.binding.DatabaseStamp)."""
        self.store, self.counter, self.params, self.database = store, counter, params, database
        self.stamp = stamp or database

    def costing(self) -> Any:
        """A fresh workspace of the source's graph model; pass it to several :meth:`compute_many`
        calls to share what one batch loaded with the next (their data is as old as the first
        load)."""
        if self.store.model == "wiki":
            return WikiWorkspace(WikiView())
        return Costing(GraphView(), self.counter, self.params.details_truncate_bytes)

    def compute_many(
        self, requests: Sequence[Request], strategy: str, costing: Any = None
    ) -> Computed:
        """Compute every request together; per-note errors are results, unavailability raises."""
        require_model(strategy, self.store)
        workspace = costing or self.costing()
        view = workspace.view
        jobs = {r: computation(strategy, workspace, self.params, r) for r in requests}
        with self.store.batch() as load:
            results = run_batch(jobs, view, lambda need: load(view, need))
        return Computed(view, results)

    def preload(self, costing: Any, note_ids: Sequence[int]) -> None:
        """Load into ``costing``'s view what computing ``note_ids`` reads of those notes
        themselves, in IN statements over all of them (graphrag.tree.preload,
        graphrag.wiki.preload): a full rebuild's piece, each row decoded once for the piece."""
        view = costing.view
        rounds = (wiki_preload if self.store.model == "wiki" else tree_preload)(view, note_ids)
        with self.store.batch() as load:
            run_batch({0: rounds}, view, lambda need: load(view, need))

    def compute(self, request: Request, strategy: str) -> Any:
        """One focus note; raises its error (e.g. NoteNotFound) instead of returning it."""
        result = self.compute_many([request], strategy).results[request]
        if isinstance(result, GraphRagError):
            raise result
        return result
