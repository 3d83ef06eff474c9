"""Graph RAG context for Doughnut notes: the pure algorithms.

This package depends on nothing else in the codebase and does no I/O: no database, no network, no
clock, no global randomness. Time (``now_ms``) and randomness (``seed``) are parameters; data arrives
through a view (:class:`GraphView` for the note tree) that the storage layer fills in batches.
Strategies are registered in :mod:`graphrag.strategies` (see docs/extending.md).
"""

from graphrag import strategies as _strategies  # registers the built-in strategies
from graphrag.core.batch import Computation, computation, run_batch
from graphrag.core.errors import (
    ConfigurationError,
    DatabaseUnavailable,
    GraphRagError,
    InvalidParameter,
    NoteNotFound,
    SchemaMismatch,
)
from graphrag.core.params import Request, StrategyParams, check_note_id, config_hash
from graphrag.core.strategy import Strategy
from graphrag.core.strategy import default as default_strategy
from graphrag.core.strategy import get as get_strategy
from graphrag.core.strategy import names as strategy_names
from graphrag.core.strategy import register as register_strategy
from graphrag.core.strategy import unregister as unregister_strategy
from graphrag.core.tokens import (
    COUNTER_NAMES,
    CharsCounter,
    MemoCounter,
    OnePerNoteCounter,
    TiktokenCounter,
    TokenCounter,
)
from graphrag.tree.layered import LayeredParams
from graphrag.tree.model import Need, Ref, Relation, Row, Skeleton
from graphrag.tree.outcome import Costing, Outcome, Pick, slice_result
from graphrag.tree.view import GraphView, MissingData
from graphrag.tree.wavefront import WavefrontParams

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
    "default_strategy",
    "get_strategy",
    "register_strategy",
    "run_batch",
    "slice_result",
    "strategy_names",
    "unregister_strategy",
]
