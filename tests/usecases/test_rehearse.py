"""A worker process rehearses a rebuild before its first task (service.rebuild.rehearse): it reads
and computes what a rebuild would, and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from service.context import ContextService
from service.rebuild import rehearse
from tests.usecases.conftest import LAYERED_LIMITS, MAX_LIMIT, SEEDS, World


def test_a_rehearsal_computes_every_strategy_and_writes_nothing(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    computed: list[tuple[str, int]] = []
    real = ContextService.compute_many

    def counted(self: ContextService, requests: Any, strategy: str, costing: Any = None) -> Any:
        computed.append((strategy, len(requests)))
        return real(self, requests, strategy, costing)

    monkeypatch.setattr(ContextService, "compute_many", counted)
    first = world.source.live_ids_after(0, 1)
    rehearse(world.service, world.cache, first, strategies=world.strategies, seeds=SEEDS,
             max_token_limit=MAX_LIMIT, layered_limits=LAYERED_LIMITS, now_ms=world.clock())
    assert [s for s, _ in computed] == list(world.strategies) and all(n > 0 for _, n in computed)
    assert world.state.snapshots == {} and world.state.generations == {}
    rehearse(world.service, world.cache, [], strategies=world.strategies, seeds=SEEDS,
             max_token_limit=MAX_LIMIT, layered_limits=LAYERED_LIMITS, now_ms=world.clock())
    assert len(computed) == len(world.strategies)  # no note: nothing to rehearse
