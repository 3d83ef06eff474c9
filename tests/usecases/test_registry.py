"""The strategy registry is the one place a strategy is added; the fingerprint covers everything.

A toy strategy registered here, in the test, runs through live compute, rebuild, the snapshot
store, the reader and the settings without any other module knowing its name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from graphrag import (
    Costing,
    InvalidParameter,
    Need,
    Outcome,
    Relation,
    Request,
    Strategy,
    StrategyParams,
    config_hash,
    default_strategy,
    get_strategy,
    register_strategy,
    strategy_names,
    unregister_strategy,
)
from graphrag.core import strategy as strategy_registry
from graphrag.tree.outcome import outcome_by_labels, prepare_focus, within_budget
from service.decoding import decode_envelope
from service.envelope import SnapshotKey
from service.reader import ReaderConfig, SnapshotReader
from tests.usecases.conftest import MAX_LIMIT, SEEDS, World
from worker.settings import load_settings


@dataclass(frozen=True, slots=True)
class ToyParams:
    """The toy's one knob: how many children it looks at."""

    children: int = 4


def toy(costing: Costing, params: ToyParams, request: Request) -> Generator[Need, None, Outcome]:
    """The focus's first children in sibling order, cut at the first that does not fit."""
    focus = yield from prepare_focus(costing.view, costing.counter, request.focus_id)
    yield from costing.view.ensure(Need(children=frozenset({request.focus_id})))
    kids = costing.view.children(request.focus_id)[: params.children]
    yield from costing.view.ensure(Need(rows=frozenset(kids)))
    picks = [p for k in kids if (p := costing.pick(k, Relation.CHILD)) is not None]
    keep = within_budget((p.tokens for p in picks), request.token_limit - focus.tokens)
    return outcome_by_labels(focus, tuple(picks[:keep]), costing.view)


TOY = Strategy(name="toy-children", version=1, model="tree", limits="prefix", params=ToyParams(),
               run=toy, sibling_radius=2, description="a test's toy")


@pytest.fixture
def registered() -> Iterator[Strategy]:
    register_strategy(TOY)
    try:
        yield TOY
    finally:
        unregister_strategy(TOY.name)


def test_a_registered_strategy_runs_everywhere(world: World, registered: Strategy) -> None:
    world.strategies = (registered.name,)
    live = world.service.compute(Request(2, 0, MAX_LIMIT, 0, MAX_LIMIT), registered.name)
    assert [p.note_id for p in live.picks] == [12, 10, 11, 13]
    report = world.rebuild([2, 10])
    assert report.count == 2 * len(SEEDS) and report.errors == {}
    env = decode_envelope(world.cache.read(SnapshotKey(2, registered.name, 0)))
    assert env is not None and orjson.dumps(env.result) == live.to_json()
    assert env.config_hash == config_hash(registered.name, StrategyParams(), "chars")
    reader = SnapshotReader(world.service, world.cache, world.coordination,
                            ReaderConfig(strategies=(registered.name,), seeds=SEEDS,
                                         max_token_limit=MAX_LIMIT), clock_ms=world.clock)
    served = reader.get(2, seed=0)
    assert (served.source, served.body) == ("cache", live.to_json())
    small = reader.get(2, seed=0, token_limit=env.focus_tokens + env.related_tokens[0])
    assert len(orjson.loads(small.body)["relatedNotes"]) == 1
    settings = load_settings(strategies=registered.name)
    assert settings.strategies_for("tree") == (registered.name,)


def test_unknown_names_and_duplicates_are_refused() -> None:
    with pytest.raises(InvalidParameter) as info:
        get_strategy("no-such")
    assert info.value.parameter == "strategy" and "wavefront" in str(info.value)
    with pytest.raises(ValueError, match="already registered"):
        register_strategy(dataclasses.replace(get_strategy("wavefront"), version=99))
    with pytest.raises(ValueError, match="lower-case"):
        Strategy(name="Bad Name", version=1, model="tree", limits="prefix", params=ToyParams(),
                 run=toy)


def test_every_strategy_declares_what_the_service_reads() -> None:
    for name in strategy_names():
        spec = get_strategy(name)
        assert spec.model in ("tree", "wiki") and spec.version >= 1
        assert dataclasses.is_dataclass(spec.params) and spec.sibling_radius >= 0
    assert strategy_names("tree")[0] == "wavefront"


def test_each_graph_model_has_its_default_from_the_registry(world: World) -> None:
    """The service names no strategy: a reader configured without strategies serves the default
    of its source's model, the first one registered for it."""
    assert (default_strategy("tree"), default_strategy("wiki")) == ("wavefront", "focus-context")
    with pytest.raises(InvalidParameter):
        default_strategy("no-such-model")
    reader = SnapshotReader(world.service, world.cache, world.coordination, ReaderConfig(),
                            clock_ms=world.clock)
    assert reader.strategies() == (strategy_names(world.source.model)[0],)


def _changed(value: Any) -> Any:
    """A different value of the same shape."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        first = value[0]
        return ((*first[:-1], _changed(first[-1])), *value[1:])
    if isinstance(value, tuple):
        return (_changed(value[0]), *value[1:])
    raise AssertionError(f"no change rule for {value!r}")


@pytest.mark.parametrize("name", strategy_names())
def test_changing_any_parameter_changes_the_fingerprint(name: str) -> None:
    spec = get_strategy(name)
    base = config_hash(name, StrategyParams(), "chars")
    assert config_hash(name, StrategyParams(), "chars") == base, "stable"
    key = name.replace("-", "_")
    for f in dataclasses.fields(spec.params):
        changed = dataclasses.replace(spec.params, **{f.name: _changed(getattr(spec.params, f.name))})
        assert config_hash(name, StrategyParams(**{key: changed}), "chars") != base, f.name
    assert config_hash(name, StrategyParams(details_truncate_bytes=151), "chars") != base
    assert config_hash(name, StrategyParams(), "tiktoken") != base
    bumped = dataclasses.replace(spec, version=spec.version + 1)
    saved = dict(strategy_registry._REGISTRY)  # restored in order: the first of a model is its default
    try:
        strategy_registry._REGISTRY[name] = bumped
        assert config_hash(name, StrategyParams(), "chars") != base, "the algorithm version"
    finally:
        strategy_registry._REGISTRY.clear()
        strategy_registry._REGISTRY.update(saved)


def test_the_wavefront_weights_bonus_and_decay_are_in_the_fingerprint() -> None:
    names = {f.name for f in dataclasses.fields(get_strategy("wavefront").params)}
    assert {"relation_weights", "depth_bonus", "recency_days"} <= names
    assert {"weights", "max_depth"} <= {f.name for f in dataclasses.fields(get_strategy(
        "relationship-bfs").params)}
