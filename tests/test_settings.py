"""Settings that shape results: each one reaches the algorithm and the snapshots' configHash."""

from __future__ import annotations

import pytest

from graphrag import CharsCounter, MemoCounter, Request, TiktokenCounter
from graphrag.core.errors import ConfigurationError
from graphrag.core.params import config_hash
from service.context import ContextService
from tests.storage.wiki_rows import random_graph
from worker.compose import build_counter, strategy_params
from worker.settings import Settings, load_settings


def test_focus_context_dedupe_reaches_the_algorithm_and_the_config_hash() -> None:
    doughnut = strategy_params(load_settings())
    deduped = strategy_params(load_settings(focus_context_dedupe="across-depths"))
    assert not doughnut.of("focus-context").dedupe_across_depths
    assert deduped.of("focus-context").dedupe_across_depths
    assert config_hash("focus-context", doughnut, "chars") != config_hash("focus-context", deduped,
                                                                          "chars")
    differing = 0
    for seed in range(4):
        db = random_graph(seed, notes=60)
        both = [ContextService(db, CharsCounter(), params) for params in (doughnut, deduped)]
        for focus in db.live_ids_after(0, 1_000):
            if db.notes[focus].notebook_id is None:
                continue
            request = Request(focus, None, 4_000, 0, 4_000)
            kept, dropped = (s.compute(request, "focus-context").to_json() for s in both)
            differing += kept != dropped
    assert differing > 0  # some foci reach a note again at depth 2, and only Doughnut's order keeps it


def test_a_bad_dedupe_value_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="GRAPHRAG_FOCUS_CONTEXT_DEDUPE"):
        load_settings(focus_context_dedupe="sometimes")


def test_the_broker_cannot_be_the_redis_cluster() -> None:
    with pytest.raises(ConfigurationError, match="the broker cannot be the Redis Cluster"):
        load_settings(redis_cluster=True, redis_url="redis://10.0.0.5:7000/0",
                      broker_url="redis://10.0.0.5:7000/1")
    ok = load_settings(redis_cluster=True, redis_url="redis://10.0.0.5:7000/0",
                       broker_url="amqp://guest:guest@10.0.0.9:5672/")
    assert ok.redis_cluster


def test_an_unknown_broker_scheme_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="BROKER_URL: the broker must be Redis or RabbitMQ"):
        load_settings(broker_url="kafka://127.0.0.1:9092")


def test_tiktoken_counts_are_remembered_unless_the_memo_is_off() -> None:
    remembered = build_counter("tiktoken", load_settings(token_memo_entries=7))
    assert isinstance(remembered, MemoCounter) and remembered.max_entries == 7
    assert remembered.count(b'{"title":"a b"}') == remembered.count(b'{"title":"a b"}') > 0
    assert remembered.entries() == 1
    plain = build_counter("tiktoken", load_settings(token_memo_entries=0))
    assert isinstance(plain, TiktokenCounter)
    assert plain.count(b'{"title":"a b"}') == remembered.count(b'{"title":"a b"}')
    assert isinstance(build_counter("chars", load_settings()), CharsCounter)


def test_a_negative_memo_size_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="GRAPHRAG_TOKEN_MEMO_ENTRIES"):
        load_settings(token_memo_entries=-1)


def test_unprefixed_variables_are_not_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A field's own name sets it in code only: a stray BROKER_URL or SCHEMA_NAME in a container's
    environment is not read (only GRAPHRAG_SCHEMA, CELERY_BROKER_URL, GRAPHRAG_BROKER_URL are)."""
    monkeypatch.setenv("SCHEMA_NAME", "doughnut-2025")
    monkeypatch.setenv("BROKER_URL", "amqp://stray:1/x")
    defaults = Settings()
    assert (defaults.schema_name, defaults.broker_url) == ("auto", "redis://127.0.0.1:6379/1")
    assert load_settings(schema_name="doughnut-2026").schema_name == "doughnut-2026"
    monkeypatch.setenv("GRAPHRAG_SCHEMA", "doughnut-2025")
    monkeypatch.setenv("GRAPHRAG_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672/v")
    read = Settings()
    assert (read.schema_name, read.broker_url) == ("doughnut-2025", "amqp://guest:guest@127.0.0.1:5672/v")


def test_a_drain_budget_near_the_task_time_limit_names_both_variables() -> None:
    with pytest.raises(ConfigurationError, match="GRAPHRAG_DRAIN_BUDGET_MS must stay well below "
                                                 "GRAPHRAG_TASK_TIME_LIMIT_S"):
        load_settings(drain_budget_ms=5_000, task_time_limit_s=10)
    assert load_settings(drain_budget_ms=2_500, task_time_limit_s=10).drain_budget_ms == 2_500
    with pytest.raises(ConfigurationError, match="GRAPHRAG_DRAIN_BATCH"):
        load_settings(drain_batch=0)
