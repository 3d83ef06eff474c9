"""Graph RAG context for Doughnut notes: the pure algorithms.

This package depends on nothing else in the codebase and does no I/O: no database, no network, no
clock, no global randomness. Time (``now_ms``) and randomness (``seed``) are parameters; data arrives
through a :class:`GraphView` that the storage layer fills in batches.
"""

from graphrag.batch import Computation, computation, run_batch
from graphrag.errors import (
    ConfigurationError,
    DatabaseUnavailable,
    GraphRagError,
    InvalidParameter,
    NoteNotFound,
    SchemaMismatch,
)
from graphrag.model import Need, Ref, Relation, Row, Skeleton
from graphrag.outcome import Costing, Outcome, Pick, slice_result
from graphrag.params import (
    STRATEGIES,
    LayeredParams,
    Request,
    StrategyParams,
    WavefrontParams,
    config_hash,
)
from graphrag.tokens import (
    COUNTER_NAMES,
    CharsCounter,
    OnePerNoteCounter,
    TiktokenCounter,
    TokenCounter,
)
from graphrag.view import GraphView, MissingData

__all__ = [
    "COUNTER_NAMES",
    "STRATEGIES",
    "CharsCounter",
    "Computation",
    "ConfigurationError",
    "Costing",
    "DatabaseUnavailable",
    "GraphRagError",
    "GraphView",
    "InvalidParameter",
    "LayeredParams",
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
    "StrategyParams",
    "TiktokenCounter",
    "TokenCounter",
    "WavefrontParams",
    "computation",
    "config_hash",
    "run_batch",
    "slice_result",
]
