"""The public surface of the pure package is small and pinned."""

import graphrag

EXPECTED = {
    "COUNTER_NAMES", "CharsCounter", "Computation", "ConfigurationError", "Costing",
    "DatabaseUnavailable", "GraphRagError", "GraphView", "InvalidParameter", "LayeredParams",
    "MemoCounter", "MissingData", "Need", "NoteNotFound", "OnePerNoteCounter", "Outcome", "Pick", "Ref",
    "Relation", "Request", "Row", "SchemaMismatch", "Skeleton", "Strategy", "StrategyParams",
    "TiktokenCounter", "TokenCounter", "WavefrontParams", "check_note_id", "computation",
    "config_hash", "default_strategy", "get_strategy", "register_strategy", "run_batch",
    "slice_result",
    "strategy_names", "unregister_strategy",
}


def test_all_is_pinned() -> None:
    assert set(graphrag.__all__) == EXPECTED
    for name in EXPECTED:
        assert hasattr(graphrag, name)
