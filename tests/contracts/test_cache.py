"""One contract for the :class:`service.ports.SnapshotCache` port, run on every implementation:
in memory, on fakeredis and on the real Redis (plus the rebuild use case end to end on each).

The real Redis is ``GRAPHRAG_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``). It is a hard
requirement: when it cannot be reached the tests fail (setup error naming the URL), never skip. Each
test works under its own key prefix (``graphrag-test:<uuid>:v1``) and deletes its keys afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from redis.exceptions import RedisClusterException

import graphrag
from graphrag import CharsCounter, Costing, Request, StrategyParams, config_hash
from graphrag.core.errors import CacheUnavailable
from service.carry import Carry
from service.context import Computed, ContextService
from service.envelope import Envelope, SnapshotKey, decode_envelope, is_fresh
from service.ports import SnapshotCache
from service.rebuild import FULL_REBUILD, rebuild
from storage.database import open_engine
from storage.memory import MemoryState
from storage.redis.cache import RedisCache
from storage.redis.scripts import WRITE_LUA
from tests.conftest import new_store
from tests.contracts.backends import (
    HARD_TTL_S,
    SOFT_TTL_S,
    CacheBackend,
    MemoryBackend,
    backend_named,
)
from tests.redis.readers import SqlCounter, snapshot_of
from tests.storage.graphs import hand_graph, load_graph
from tests.support import NOW_MS

MAX_LIMIT = 5_000
LAYERED_LIMITS = (2_500, 5_000)


def write(store: SnapshotCache, env: Envelope) -> bool:
    return store.write_many([env])[0]


def wf(note_id: int, seed: int = 0) -> SnapshotKey:
    return SnapshotKey(note_id, "wavefront", seed)


def layered_keys(note_id: int, seeds: Sequence[int]) -> list[SnapshotKey]:
    return [SnapshotKey(note_id, "layered", s, lim) for s in seeds for lim in LAYERED_LIMITS]


def envelope(note_id: int, generation: int, shows: list[int], *, seed: int = 0,
             strategy: str = "wavefront", limit: int = MAX_LIMIT, computed_at_ms: int = NOW_MS,
             config: str = "cfg") -> Envelope:
    """A small, valid envelope (its result is a stub: the store never looks inside)."""
    result = {"focusNote": {"uri": f"/n{note_id}"}, "relatedNotes": [{"uri": f"/n{i}"} for i in shows]}
    return Envelope(note_id=note_id, seed=seed, strategy=strategy, generation=generation,
                    computed_at_ms=computed_at_ms, as_of_ms=NOW_MS, max_token_limit=limit,
                    focus_tokens=10, related_tokens=tuple(5 for _ in shows),
                    depends_on=tuple(sorted({note_id, *shows})), config_hash=config,
                    result_json=orjson.dumps(result))


def statements_of_rebuild(service: ContextService, store: Any, ids: list[int], **options: Any) -> int:
    """SQL statements a wavefront rebuild of ``ids`` (seed 0) runs."""
    counter = SqlCounter(service.store.engine)
    try:
        rebuild(service, store, ids, strategies=("wavefront",), seeds=(0,),
                max_token_limit=MAX_LIMIT, now_ms=NOW_MS, **options)
    finally:
        counter.close()
    return counter.count


class CacheContract:
    """The contract; subclasses name their backend (``memory``, ``fakeredis`` or ``redis``)."""

    backend_name = ""

    @pytest.fixture
    def backend(self) -> Iterator[CacheBackend]:
        with backend_named(self.backend_name) as backend:
            yield backend

    @pytest.fixture
    def store(self, backend: CacheBackend) -> Any:
        self.backend = backend
        return backend.cache

    @pytest.fixture
    def service(self, tmp_path: Path) -> Iterator[ContextService]:
        engine = open_engine(f"sqlite:///{tmp_path / 'notes.db'}")
        notes = new_store(engine)
        load_graph(notes, hand_graph())
        yield ContextService(notes, CharsCounter(), StrategyParams())
        engine.dispose()

    # -- helpers ----------------------------------------------------------------------------------
    def assert_index_matches(self, _: Any = None) -> None:
        """Every reverse-index set equals what the stored snapshots' ``dependsOn`` say, no more."""
        assert self.backend.index_mismatches() == {}

    # -- compare-and-set --------------------------------------------------------------------------
    def test_cas_refuses_an_older_generation_written_after_a_newer_one(
        self, store: Any
    ) -> None:
        older = store.bump_generations([7])[7]
        newer = store.bump_generations([7])[7]
        assert newer > older
        assert write(store, envelope(7, newer, [1]))
        assert not write(store, envelope(7, older, [2]))
        stored = snapshot_of(store, 7, "wavefront", 0)
        assert stored is not None and stored.generation == newer and stored.depends_on == (1, 7)
        assert store.dependents([2]) == set()
        self.assert_index_matches(store)

    def test_cas_accepts_a_missing_counter_an_equal_and_a_newer_generation(
        self, store: Any
    ) -> None:
        assert store.generations([8]) == {8: 0}
        assert write(store, envelope(8, 0, [1]))
        current = store.bump_generations([8])[8]
        assert store.generations([8]) == {8: current}
        assert not write(store, envelope(8, 0, [1]))
        assert write(store, envelope(8, current, [2]))
        assert write(store, envelope(8, current + 5, [3]))
        stored = snapshot_of(store, 8, "wavefront", 0)
        assert stored is not None and stored.generation == current + 5
        self.assert_index_matches(store)

    def test_read_current_gives_the_snapshot_and_its_notes_generation_at_once(
        self, store: Any
    ) -> None:
        assert store.read_current(wf(4)) == (None, 0)
        generation = store.bump_generations([4])[4]
        assert store.read_current(wf(4)) == (None, generation)
        assert write(store, envelope(4, generation, [1]))
        assert store.read_current(wf(4)) == (store.read(wf(4)), generation)
        later = store.bump_generations([4])[4]  # an event affecting 4 after its computation
        raw, current = store.read_current(wf(4))
        stored = decode_envelope(raw)
        assert current == later and stored is not None and stored.generation < current

    def test_generations_keep_increasing_after_the_counter_is_lost(self, store: Any) -> None:
        first = store.bump_generations([1, 2, 3])
        self.backend.lose_generation(2)  # expiry or eviction
        second = store.bump_generations([1, 2, 3])
        assert all(second[i] > first[i] for i in (1, 2, 3))
        assert store.generations([1, 2, 3]) == second

    def test_delete_focus_is_a_compare_and_set_too(self, store: Any) -> None:
        assert write(store, envelope(5, 0, [6]))
        newer = store.bump_generations([5])[5]
        assert write(store, envelope(5, newer, [6]))
        assert not store.delete_focus(5, [wf(5)], generation=0)
        assert snapshot_of(store, 5, "wavefront", 0) is not None
        assert store.dependents([6]) == {5}
        assert store.delete_focus(5, [wf(5)], generation=newer)
        assert snapshot_of(store, 5, "wavefront", 0) is None

    # -- reverse index ----------------------------------------------------------------------------
    def test_reverse_index_equals_the_snapshots_contents_after_rewrites(
        self, store: Any
    ) -> None:
        steps = [
            envelope(1, 0, [10, 11]),
            envelope(1, 0, [11, 12], seed=1),
            envelope(2, 0, [10]),
            envelope(1, 0, [12, 13]),                 # drops 10 and 11 (11 still shown by seed 1)
            envelope(1, 0, [], seed=1),               # drops 11 and 12 (12 still shown by seed 0)
            envelope(1, 0, [14], strategy="layered", limit=2_500),
            envelope(2, 0, [13]),                     # drops 10
            envelope(1, 0, [10, 14], strategy="layered", limit=5_000),
        ]
        for step in steps:
            assert write(store, step)
            self.assert_index_matches(store)
        assert store.dependents([10]) == {1}
        assert store.dependents([11]) == set()
        assert store.dependents([12]) == {1}
        assert store.dependents([13]) == {1, 2}
        assert store.shown_by([1]) == {1: {1, 10, 12, 13, 14}}

    def test_a_refused_write_leaves_no_index_entries(self, store: Any) -> None:
        assert write(store, envelope(3, 0, [30]))
        store.bump_generations([3])
        assert not write(store, envelope(3, 0, [31, 32]))
        assert store.dependents([31]) == store.dependents([32]) == set()
        assert store.dependents([30]) == {3}
        self.assert_index_matches(store)

    def test_a_dependency_dropped_by_one_variant_and_added_by_another_stays(
        self, store: Any
    ) -> None:
        assert write(store, envelope(4, 0, [40]))
        assert store.write_many([envelope(4, 0, []), envelope(4, 0, [40], seed=1)]) == [True, True]
        assert store.dependents([40]) == {4}
        self.assert_index_matches(store)

    def test_a_batch_showing_more_notes_than_one_index_command_covers(self, store: Any) -> None:
        """1,200 foci, each showing note 100000 and a note of its own: 1,201 ``dep:`` keys, one of
        them with 1,200 members; one focus refused midway, its flag in its place."""
        foci = range(1, 1_201)
        newer = store.bump_generations([7])[7]
        accepted = store.write_many([envelope(f, 0, [100_000, 200_000 + f]) for f in foci])
        assert accepted == [f != 7 for f in foci]
        assert store.dependents([100_000]) == set(foci) - {7}
        assert all(store.dependents([200_000 + f]) == ({f} - {7}) for f in (1, 500, 501, 1_200))
        assert write(store, envelope(7, newer, [100_000]))
        self.assert_index_matches(store)

    def test_an_expired_snapshot_stops_counting_at_the_next_write(self, store: Any) -> None:
        assert write(store, envelope(9, 0, [90]))
        assert write(store, envelope(9, 0, [91], seed=1))
        self.backend.expire(wf(9, 1))  # as if its hard TTL ran out
        assert write(store, envelope(9, 0, [90]))
        assert store.dependents([91]) == set()
        self.assert_index_matches(store)

    def test_delete_focus_removes_snapshots_and_their_index_entries(self, store: Any) -> None:
        store.write_many([
            envelope(3, 0, [20]), envelope(3, 0, [21], seed=1),
            envelope(3, 0, [22], strategy="layered", limit=2_500), envelope(4, 0, [20]),
        ])
        assert store.delete_focus(3, [wf(3), wf(3, 1), *layered_keys(3, [0, 1])], generation=None)
        assert snapshot_of(store, 3, "wavefront", 0) is None
        assert snapshot_of(store, 3, "wavefront", 1) is None
        assert snapshot_of(store, 3, "layered", 0, 2_500) is None
        assert store.dependents([20]) == {4}
        assert store.dependents([21]) == store.dependents([22]) == store.dependents([3]) == set()
        assert not self.backend.has_shows(3)
        self.assert_index_matches(store)

    # -- decoding ---------------------------------------------------------------------------------
    def test_corrupt_and_foreign_bytes_decode_to_none(self, store: Any) -> None:
        good = envelope(1, 0, [2]).to_json()
        bad: list[Any] = [
            b"", b"\xff\xfe\x00", b"not json", b"[]", b"null", b"42", b'{"schema": 1}',
            orjson.dumps({**good, "schema": 2}), orjson.dumps({**good, "schema": True}),
            orjson.dumps({k: v for k, v in good.items() if k != "result"}),
            orjson.dumps({**good, "dependsOn": ["1"]}), orjson.dumps({**good, "noteId": 1.5}),
            orjson.dumps({**good, "result": {"focusNote": [], "relatedNotes": []}}),
            orjson.dumps({**good, "resultCrc32": "0"}),
            orjson.dumps({"result": good["result"]} | good),  # the result is not the last member
            orjson.dumps(good).replace(b'"/n2"', b'"/n3"'),  # a result its checksum does not match
            orjson.dumps(good)[:-2] + b"}",  # cut short
        ]
        assert [data for data in bad if decode_envelope(data) is not None] == []
        assert decode_envelope(orjson.dumps(good)) == envelope(1, 0, [2])
        for data in bad[:3]:
            self.backend.plant(wf(1), data)
            assert snapshot_of(store, 1, "wavefront", 0) is None
        assert write(store, envelope(1, 0, [2]))  # and gets overwritten
        assert snapshot_of(store, 1, "wavefront", 0) == envelope(1, 0, [2])

    def test_a_value_without_a_checksum_is_checked_whole(self, store: Any) -> None:
        good = {k: v for k, v in envelope(1, 0, [2]).to_json().items() if k != "resultCrc32"}
        assert decode_envelope(orjson.dumps(good)) == envelope(1, 0, [2])
        for bad in ({**good, "result": {"focusNote": [], "relatedNotes": []}},
                    {**good, "relatedTokens": [1, 2, 3]}):
            assert decode_envelope(orjson.dumps(bad)) is None

    def test_a_trace_is_kept_as_checked_bytes_and_parsed_only_when_asked(self, store: Any) -> None:
        trace = {"format": 1, "focusId": 1, "notes": {"2": {"title": "a \\uD83D cut"}}}
        env = replace(envelope(1, 0, []), strategy="focus-context", seed=None, result_limit=2000,
                      trace_json=orjson.dumps(trace))
        data = env.encode()
        got = decode_envelope(data)
        assert got == env and "trace" not in got.__dict__  # not parsed by decoding
        assert got.trace == trace and got.to_json()["trace"] == trace
        header = {k: v for k, v in env.to_json().items() if k not in ("trace", "result")}
        bad = [
            data.replace(b'"title":"a', b'"title":"b'),  # a trace its checksum does not match
            orjson.dumps({**header, "traceCrc32": None, "trace": trace, "result": env.result}),
            orjson.dumps({**header, "result": env.result}),  # a checksum without its trace
            orjson.dumps({k: v for k, v in header.items() if k != "traceCrc32"}
                         | {"trace": trace, "result": env.result}),
            orjson.dumps({**header, "resultTokenLimit": None, "trace": trace, "result": env.result}),
        ]
        assert [d for d in bad if decode_envelope(d) is not None] == []
        whole = {k: v for k, v in env.to_json().items() if k not in ("resultCrc32", "traceCrc32")}
        assert decode_envelope(orjson.dumps(whole)) == env  # written before the checksums

    def test_a_result_that_does_not_fit_its_token_counts_is_served_whole_but_never_sliced(
        self, store: Any
    ) -> None:
        good = envelope(1, 0, [2, 3]).to_json()
        assert decode_envelope(orjson.dumps(good)).sliceable  # type: ignore[union-attr]
        for tokens in ([5], [5, 5, 5]):
            odd = decode_envelope(orjson.dumps({**good, "relatedTokens": tokens}))
            assert odd is not None and not odd.sliceable
            assert odd.result_json == envelope(1, 0, [2, 3]).result_json

    def test_freshness_needs_the_soft_ttl_and_the_running_configuration(
        self, store: Any
    ) -> None:
        env = envelope(1, 0, [], computed_at_ms=NOW_MS, config="abc")
        assert is_fresh(env, NOW_MS + SOFT_TTL_S * 1000 - 1, soft_ttl_s=store.soft_ttl_s,
                        config_hash="abc")
        assert not is_fresh(env, NOW_MS + SOFT_TTL_S * 1000, soft_ttl_s=store.soft_ttl_s,
                            config_hash="abc")
        assert not is_fresh(env, NOW_MS, soft_ttl_s=store.soft_ttl_s, config_hash="other")

    # -- edit stamps and unavailability -----------------------------------------------------------
    def test_touched_since_reports_notes_edited_after_a_sequence_number(
        self, store: Any
    ) -> None:
        before = store.current_seq()
        stamp = store.stamp_touched([5, 6])
        assert stamp > before
        assert store.touched_since([5, 6, 7], before) == {5, 6}
        assert store.touched_since([5, 6, 7], stamp) == set()

    def test_stamping_no_note_still_takes_a_new_sequence_number(self, store: Any) -> None:
        before = store.current_seq()
        assert store.stamp_touched(()) > before
        assert store.current_seq() > before

    def test_stamps_from_before_a_lost_sequence_are_not_newer_than_it(self, store: Any) -> None:
        for _ in range(3):
            store.stamp_touched([5])
        store.stamp_touched([FULL_REBUILD])  # a full rebuild started
        self.backend.lose_seq()  # a cluster primary restarted empty, an eviction
        read_by_a_rebuild = store.current_seq()
        assert store.touched_since([5, FULL_REBUILD], read_by_a_rebuild) == set()  # not raced
        assert store.stamp_touched([6]) > read_by_a_rebuild
        later = store.current_seq()
        assert store.touched_since([5, 6], later) == set()  # else: requeued on every rebuild

    def test_an_unreachable_cache_raises_cache_unavailable(self) -> None:
        with backend_named(self.backend_name, connected=False) as down:
            store = down.cache
            calls = [
                lambda: store.read(wf(1)), lambda: write(store, envelope(1, 0, [2])),
                lambda: store.bump_generations([1]), lambda: store.generations([1]),
                lambda: store.dependents([1]), lambda: store.delete_focus(1, [wf(1)]),
            ]
            for call in calls:
                with pytest.raises(CacheUnavailable) as caught:
                    call()
                if self.backend_name != "memory":  # a driver error, translated at the seam
                    assert isinstance(caught.value.__cause__, redis.ConnectionError | redis.TimeoutError
                                      | RedisClusterException)

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


class RedisCacheContract(CacheContract):
    """What only a Redis-backed cache can show: key TTLs and foreign key types."""

    # -- TTLs and key types (Redis only) ---------------------------------------------------------
    def test_every_key_written_carries_a_ttl(self, store: Any) -> None:
        store.bump_generations([1, 2])
        store.write_many([envelope(1, 0, [2, 3]), envelope(2, 0, [3], strategy="layered", limit=2_500)])
        store.delete_focus(1, generation=None)
        write(store, envelope(1, store.generations([1])[1], [4]))
        store.stamp_touched([3, 4])
        hard_ms = HARD_TTL_S * 1000
        keys = sorted(store.redis.scan_iter(match=store.keys.pattern(), count=1000))
        kinds = {key: key.decode()[len(store.keys.prefix) + 1:].split(":")[0] for key in keys}
        assert set(kinds.values()) == {"snap", "gen", "dep", "shows", "touched", "seq"}
        for key, kind in kinds.items():
            ttl_ms = store.redis.pttl(key)
            if kind == "seq":
                assert ttl_ms == -1, "the global edit sequence is the one persistent key"
            elif kind == "snap":
                assert hard_ms - 60_000 < ttl_ms <= hard_ms, key
            elif kind in ("gen", "dep", "shows"):
                assert ttl_ms > hard_ms, key  # the index outlives every snapshot it describes
            else:
                assert ttl_ms > 0, key

    def test_a_foreign_key_type_is_a_miss_and_gets_overwritten(self, store: Any) -> None:
        key = store.keys.snapshot(1, "wavefront", 0)
        store.redis.rpush(key, b"x")
        assert store.read(wf(1)) is None
        store.redis.hset(store.keys.generation(1), "x", "1")
        assert store.read_current(wf(1)) == (None, 0)
        store.redis.delete(store.keys.generation(1))
        assert write(store, envelope(1, 0, [2]))
        assert snapshot_of(store, 1, "wavefront", 0) == envelope(1, 0, [2])


    def test_a_server_holding_some_of_the_scripts_gets_all_before_a_first_write(
        self, store: Any,
    ) -> None:
        """An older worker fed the server some of the scripts (a rolling upgrade): a new process
        loads them all before its first write, so no attempt runs the CAS scripts without the
        index scripts (a dependency dropped in that attempt would stay in ``dep:``)."""
        assert write(store, envelope(3, 0, [7, 8]))
        store.redis.script_flush()
        store.redis.script_load(WRITE_LUA)
        fresh = RedisCache(store.redis, prefix=store.keys.prefix, soft_ttl_s=SOFT_TTL_S,
                           hard_ttl_s=HARD_TTL_S)
        assert write(fresh, envelope(3, 0, [7]))
        assert fresh.dependents([8]) == set()
        self.assert_index_matches(store)


class TestMemoryCache(CacheContract):
    backend_name = "memory"

    def test_snapshots_expire_after_the_hard_ttl(self) -> None:
        clock = [NOW_MS]
        state = MemoryState(clock_ms=lambda: clock[0])
        store = MemoryBackend(state).cache
        assert write(store, envelope(1, 0, [2]))
        clock[0] += HARD_TTL_S * 1000 - 1
        assert store.read(wf(1)) is not None
        clock[0] += 1
        assert store.read(wf(1)) is None


class TestFakeRedisCache(RedisCacheContract):
    backend_name = "fakeredis"


@pytest.mark.redis
class TestRealRedisCache(RedisCacheContract):
    backend_name = "redis"


@pytest.mark.redis
class TestClusterCache(RedisCacheContract):
    backend_name = "cluster"
