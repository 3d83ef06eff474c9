"""Graph RAG context for Doughnut notes: the pure algorithms.

This package depends on nothing else in the codebase and does no I/O: no database, no network, no
clock, no global randomness. Time (``now_ms``) and randomness (``seed``) are parameters; data arrives
through a view (:class:`GraphView` for the note tree) that the storage layer fills in batches.
Strategies are registered in :mod:`graphrag.strategies` (see docs/extending.md).
"""

from graphrag import strategies as _strategies  # registers the built-in strategies
from graphrag.batch import Computation, computation, run_batch
from graphrag.errors import (
    ConfigurationError,
    DatabaseUnavailable,
    GraphRagError,
    InvalidParameter,
    NoteNotFound,
    SchemaMismatch,
)
from graphrag.layered import LayeredParams
from graphrag.model import Need, Ref, Relation, Row, Skeleton
from graphrag.outcome import Costing, Outcome, Pick, slice_result
from graphrag.params import Request, StrategyParams, check_note_id, config_hash
from graphrag.strategy import Strategy
from graphrag.strategy import get as get_strategy
from graphrag.strategy import names as strategy_names
from graphrag.strategy import register as register_strategy
from graphrag.strategy import unregister as unregister_strategy
from graphrag.tokens import (
    COUNTER_NAMES,
    CharsCounter,
    MemoCounter,
    OnePerNoteCounter,
    TiktokenCounter,
    TokenCounter,
)
from graphrag.view import GraphView, MissingData
from graphrag.wavefront import WavefrontParams

del _strategies

__all__ = [
    "COUNTER_NAMES",
    "CharsCounter",
    "Computation",
    "ConfigurationError",
    "Costing",
    "DatabaseUnavailable",
    "GraphRagError",
    "GraphView",
    "InvalidParameter",
    "LayeredParams",
    "MemoCounter",
    "MissingData",
    "Need",
    "NoteNotFound",
    "OnePerNoteCounter",
    "Outcome",
    "Pick",
    "Ref",
    "Relation",
    "Request",
    "Row",
    "SchemaMismatch",
    "Skeleton",
    "Strategy",
    "StrategyParams",
    "TiktokenCounter",
    "TokenCounter",
    "WavefrontParams",
    "check_note_id",
    "computation",
    "config_hash",
    "get_strategy",
    "register_strategy",
    "run_batch",
    "slice_result",
    "strategy_names",
    "unregister_strategy",
]
