"""The :class:`service.ports.SnapshotCache` contract on every backend (in memory, fakeredis, the
real Redis, a local Redis Cluster), continued: the rebuild use case end to end. A rebuild stores the
bytes a live compute gives, and their prefix slices equal live computes at smaller limits; it removes
the snapshots of deleted and missing notes; it reads generations before computing, so an edit
meanwhile refuses its write, and it reports the foci an edit raced; an epoch reads every generation
before its first batch, its batches share what they loaded, and a carried workspace serves until an
edit is stamped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

import graphrag
from graphrag import CharsCounter, Costing, Request, StrategyParams, config_hash
from service.carry import Carry
from service.context import Computed, ContextService
from service.envelope import Envelope
from service.rebuild import rebuild
from storage.database import open_engine
from tests.conftest import new_store
from tests.contracts.cache_contract import LAYERED_LIMITS, MAX_LIMIT, CacheContract, envelope, wf
from tests.redis.readers import SqlCounter, snapshot_of
from tests.storage.graphs import hand_graph, load_graph
from tests.support import NOW_MS


def statements_of_rebuild(service: ContextService, store: Any, ids: list[int], **options: Any) -> int:
    """SQL statements a wavefront rebuild of ``ids`` (seed 0) runs."""
    counter = SqlCounter(service.store.engine)
    try:
        rebuild(service, store, ids, strategies=("wavefront",), seeds=(0,),
                max_token_limit=MAX_LIMIT, now_ms=NOW_MS, **options)
    finally:
        counter.close()
    return counter.count


class RebuildContract(CacheContract):
    """The rebuild end to end, on every backend (over the hand-built graph in SQLite)."""

    @pytest.fixture
    def service(self, tmp_path: Path) -> Iterator[ContextService]:
        engine = open_engine(f"sqlite:///{tmp_path / 'notes.db'}")
        notes = new_store(engine)
        load_graph(notes, hand_graph())
        yield ContextService(notes, CharsCounter(), StrategyParams())
        engine.dispose()

    # -- rebuild end to end -----------------------------------------------------------------------
    def test_rebuild_stores_live_bytes_and_slices_equal_live_computes(
        self, store: Any, service: ContextService
    ) -> None:
        foci, seeds = [2, 10, 13, 20, 60], (0, 7)
        report = rebuild(service, store, foci, strategies=("wavefront", "layered"), seeds=seeds,
                         max_token_limit=MAX_LIMIT, layered_limits=LAYERED_LIMITS, now_ms=NOW_MS)
        assert (report.count, report.errors, report.rejected) == (len(foci) * len(seeds) * 3, {}, 0)
        sliced_something = False
        for focus in foci:
            for seed in seeds:
                env = snapshot_of(store, focus, "wavefront", seed)
                assert env is not None
                assert env.config_hash == config_hash("wavefront", StrategyParams(), "chars")
                live = service.compute(Request(focus, seed, MAX_LIMIT, NOW_MS, MAX_LIMIT), "wavefront")
                assert orjson.dumps(env.result) == live.to_json()
                assert all(focus in store.dependents([x]) for x in env.depends_on)
                for small in self.small_limits(env):
                    cut = graphrag.slice_result(env.result, env.focus_tokens, env.related_tokens, small)
                    want = service.compute(Request(focus, seed, small, NOW_MS, MAX_LIMIT), "wavefront")
                    assert orjson.dumps(cut) == want.to_json(), (focus, seed, small)
                    sliced_something |= len(cut["relatedNotes"]) < len(env.result["relatedNotes"])
                for limit in LAYERED_LIMITS:
                    layered = snapshot_of(store, focus, "layered", seed, limit)
                    assert layered is not None and layered.max_token_limit == limit
                    want = service.compute(Request(focus, seed, limit, NOW_MS), "layered")
                    assert orjson.dumps(layered.result) == want.to_json()
        assert sliced_something
        self.assert_index_matches(store)

    @staticmethod
    def small_limits(env: Envelope) -> list[int]:
        """Limits that cut the snapshot at its start, in the middle, between notes and at its end."""
        prefix_costs = [env.focus_tokens]
        for cost in env.related_tokens:
            prefix_costs.append(prefix_costs[-1] + cost)
        middle = prefix_costs[len(prefix_costs) // 2]
        return sorted({1, env.focus_tokens, middle - 1, middle, middle + 1, prefix_costs[-1]})

    def test_rebuild_removes_snapshots_of_deleted_and_missing_notes(
        self, store: Any, service: ContextService
    ) -> None:
        store.write_many([envelope(50, 0, [2]), envelope(9_999, 0, [2], seed=1)])
        report = rebuild(service, store, [50, 9_999, 2], strategies=("wavefront",), seeds=(0, 1),
                         max_token_limit=MAX_LIMIT, now_ms=NOW_MS)
        assert report.deleted == {50, 9_999} and report.errors == {}
        assert report.count == 2 and report.foci == 3
        assert snapshot_of(store, 50, "wavefront", 0) is None
        assert snapshot_of(store, 9_999, "wavefront", 1) is None
        assert 50 not in store.dependents([2]) and 9_999 not in store.dependents([2])
        assert 2 in store.dependents([2])
        self.assert_index_matches(store)

    def test_rebuild_reads_generations_before_computing(
        self, store: Any, service: ContextService
    ) -> None:
        racing = Racing.around(service, lambda: store.bump_generations([10, 13]))
        report = rebuild(racing, store, [10, 13], strategies=("wavefront",), seeds=(0,),
                         max_token_limit=MAX_LIMIT, now_ms=NOW_MS)
        assert (report.count, report.rejected) == (0, 2)
        assert snapshot_of(store, 10, "wavefront", 0) is None
        self.assert_index_matches(store)

    def test_rebuild_reports_foci_an_edit_raced(
        self, store: Any, service: ContextService
    ) -> None:
        racing = Racing.around(service, lambda: store.stamp_touched([10]))
        report = rebuild(racing, store, [10, 60, 2], strategies=("wavefront",), seeds=(0,),
                         max_token_limit=MAX_LIMIT, now_ms=NOW_MS)
        assert report.count == 3
        stored = {f: snapshot_of(store, f, "wavefront", 0) for f in (10, 60, 2)}
        shows_10 = {f for f, env in stored.items() if env is not None and 10 in env.depends_on}
        assert report.requeue == shows_10 and 10 in shows_10
        assert "3 snapshots" in report.summary()
        for focus, env in stored.items():  # a raced snapshot is outdated until it is redone
            assert env is not None
            counter = store.read_current(wf(focus))[1]
            assert (env.generation < counter) == (focus in shows_10), focus


    def test_an_epoch_reads_every_generation_before_its_first_batch(
        self, store: Any, service: ContextService
    ) -> None:
        """Batches of one epoch share loaded data, so an event during the epoch's first batch
        must refuse a later batch's write even though that batch had not started yet."""
        bumps = iter([lambda: store.bump_generations([13])])
        racing = Racing.around(service, lambda: next(bumps, lambda: None)())
        report = rebuild(racing, store, [10, 13, 2], strategies=("wavefront",), seeds=(0,),
                         max_token_limit=MAX_LIMIT, now_ms=NOW_MS, batch_size=1, epoch_size=3)
        assert (report.count, report.rejected) == (2, 1)
        assert snapshot_of(store, 13, "wavefront", 0) is None
        assert snapshot_of(store, 2, "wavefront", 0) is not None
        self.assert_index_matches(store)

    def test_a_carried_workspace_serves_until_an_edit_is_stamped(
        self, store: Any, service: ContextService
    ) -> None:
        carry, counts = Carry(), []
        for stamp in (False, False, True):
            if stamp:
                store.stamp_touched([99])
            counts.append(statements_of_rebuild(service, store, [2, 10, 13], carry=carry))
        assert counts[0] > 0 and counts[1] == 0 and counts[2] == counts[0]

    def test_an_epochs_batches_share_what_they_loaded(
        self, store: Any, service: ContextService
    ) -> None:
        counts = [  # epochs that carry nothing on, against one epoch
            statements_of_rebuild(service, store, [2, 10, 13, 20, 60], batch_size=1,
                                  epoch_size=epoch_size, carry=Carry(max_foci=1))
            for epoch_size in (1, 5)]
        assert counts[1] < counts[0]
        for focus in (2, 10, 13, 20, 60):
            env = snapshot_of(store, focus, "wavefront", 0)
            live = service.compute(Request(focus, 0, MAX_LIMIT, NOW_MS, MAX_LIMIT), "wavefront")
            assert env is not None and orjson.dumps(env.result) == live.to_json()


class Racing(ContextService):
    """A ContextService that lets an 'edit' happen after the generations were read, mid-batch."""

    edit: Callable[[], object]

    @classmethod
    def around(cls, service: ContextService, edit: Callable[[], object]) -> Racing:
        racing = cls(service.store, service.counter, service.params)
        racing.edit = edit
        return racing

    def compute_many(self, requests: Sequence[Request], strategy: str,
                     costing: Costing | None = None) -> Computed:
        self.edit()
        return super().compute_many(requests, strategy, costing)


class TestMemoryCache(RebuildContract):
    backend_name = "memory"


class TestFakeRedisCache(RebuildContract):
    backend_name = "fakeredis"


@pytest.mark.redis
class TestRealRedisCache(RebuildContract):
    backend_name = "redis"


@pytest.mark.redis
class TestClusterCache(RebuildContract):
    backend_name = "cluster"
