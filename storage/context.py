"""Computing contexts from the database: the batched loader wired to the pure algorithms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import create_engine, make_url
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from graphrag import (
    Costing,
    GraphRagError,
    GraphView,
    Outcome,
    Request,
    StrategyParams,
    TokenCounter,
    computation,
    run_batch,
)
from graphrag.errors import ConfigurationError, DatabaseUnavailable
from storage.sql import NoteStore, prepare_engine

__all__ = ["Computed", "ContextService", "open_engine"]


def _shown(url: str) -> str:
    """The URL without its password, for messages (an unparsable one is not shown at all)."""
    try:
        return repr(make_url(url).render_as_string(hide_password=True))
    except (ArgumentError, ValueError):
        return "(unparsable)"


def open_engine(url: str) -> Engine:
    """An engine for a SQLAlchemy URL; a malformed URL is a configuration error (no password)."""
    try:
        engine = create_engine(url, pool_pre_ping=True)
    except (ArgumentError, ValueError) as err:
        raise ConfigurationError(f"database URL {_shown(url)} is not a valid SQLAlchemy URL") from err
    except ImportError as err:
        raise ConfigurationError(f"no driver installed for database URL {_shown(url)}") from err
    except NoSuchModuleError as err:
        raise ConfigurationError(f"unknown database dialect in URL {_shown(url)}") from err
    return prepare_engine(engine)


@dataclass(frozen=True)
class Computed:
    """A batch's outcomes (or per-note errors) and the view they were computed from."""

    view: GraphView
    results: dict[Request, Outcome | GraphRagError]


class ContextService:
    """Computes contexts for batches of focus notes with one set of IN queries per round."""

    def __init__(self, store: NoteStore, counter: TokenCounter, params: StrategyParams) -> None:
        self.store, self.counter, self.params = store, counter, params

    def costing(self) -> Costing:
        """A fresh view and costing memo; pass it to several :meth:`compute_many` calls to share
        what one batch loaded with the next (their data is as old as the first load)."""
        return Costing(GraphView(), self.counter, self.params.details_truncate_bytes)

    def compute_many(
        self, requests: Sequence[Request], strategy: str, costing: Costing | None = None
    ) -> Computed:
        """Compute every request together; per-note errors are results, unavailability raises."""
        costing = costing or self.costing()
        view = costing.view
        jobs = {r: computation(strategy, costing, self.params, r) for r in requests}
        try:
            with self.store.engine.connect() as conn:
                results = run_batch(jobs, view, self.store.loader(conn, view))
        except SQLAlchemyError as err:
            raise DatabaseUnavailable(f"database unreachable: {err.__class__.__name__}") from err
        return Computed(view, results)

    def compute(self, request: Request, strategy: str) -> Outcome:
        """One focus note; raises its error (e.g. NoteNotFound) instead of returning it."""
        result = self.compute_many([request], strategy).results[request]
        if isinstance(result, GraphRagError):
            raise result
        return result
