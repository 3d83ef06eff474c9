"""The public surface of the pure package is small and pinned."""

import graphrag

EXPECTED = {
    "COUNTER_NAMES", "STRATEGIES", "CharsCounter", "Computation", "ConfigurationError", "Costing",
    "DatabaseUnavailable", "GraphRagError", "GraphView", "InvalidParameter", "LayeredParams",
    "MissingData", "Need", "NoteNotFound", "OnePerNoteCounter", "Outcome", "Pick", "Ref",
    "Relation", "Request", "Row", "SchemaMismatch", "Skeleton", "StrategyParams",
    "TiktokenCounter", "TokenCounter", "WavefrontParams", "computation", "config_hash",
    "run_batch", "slice_result",
}


def test_all_is_pinned() -> None:
    assert set(graphrag.__all__) == EXPECTED
    for name in EXPECTED:
        assert hasattr(graphrag, name)
