"""What the workers count (service.metrics.WorkMetrics through service.drain.observed) and the
state gauges read at a scrape (service.state_metrics), over the in-memory ports."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from service.drain import drain_session, observed
from service.metrics import WorkMetrics
from service.state_metrics import MemoryUse, StateCollector
from storage.memory import MemoryProgress
from tests.usecases.conftest import World


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``registry`` by (name, sorted labels), through the text exposition."""
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_a_drain_session_counts_its_batches_and_how_long_each_focus_waited(world: World) -> None:
    registry = CollectorRegistry()
    metrics = WorkMetrics.create(registry)
    dirtied = world.clock()
    world.dirty.add([1, 2, 3], now_ms=dirtied, lane="urgent")
    world.now[0] += 2_000  # the drain writes them two seconds after they were marked dirty
    drain_session(world.dirty, world.rebuild, batch=100, debounce_ms=0, budget_s=60,
                  clock_ms=world.clock, lease_ms=10_000,
                  on_batch=observed(metrics, world.clock))
    got = samples(registry)
    assert got[("graphrag_drain_batches_total", ())] == 1
    assert got[("graphrag_rebuilt_snapshots_total", (("path", "drain"),))] > 0
    assert got[("graphrag_rebuilt_snapshots_total", (("path", "full"),))] == 0
    urgent = (("lane", "urgent"),)
    assert got[("graphrag_edit_fresh_seconds_count", urgent)] == 3
    assert got[("graphrag_edit_fresh_seconds_sum", urgent)] == 6.0
    assert got[("graphrag_edit_fresh_seconds_bucket", (*urgent, ("le", "1.0")))] == 0
    assert got[("graphrag_edit_fresh_seconds_bucket", (*urgent, ("le", "2.5")))] == 3
    assert got[("graphrag_edit_fresh_seconds_count", (("lane", "wide"),))] == 0
    stage = "graphrag_edit_stage_seconds"
    assert got[(f"{stage}_count", (("stage", "debounce"),))] == 3  # each focus: dirty until taken
    assert got[(f"{stage}_sum", (("stage", "debounce"),))] == 6.0
    assert got[(f"{stage}_count", (("stage", "compute"),))] == 1  # the batch
    assert got[(f"{stage}_count", (("stage", "write"),))] == 1
    assert got[(f"{stage}_sum", (("stage", "compute"),))] > 0
    assert got[(f"{stage}_sum", (("stage", "write"),))] > 0
    assert got[(f"{stage}_count", (("stage", "delivery"),))] == 0  # (the event task's, not here)


def collector(world: World, progress: MemoryProgress) -> StateCollector:
    return StateCollector(world.dirty, {"nightly": progress}, lambda: MemoryUse(600, 1_000),
                          world.clock)


def test_the_state_gauges_read_the_backlog_the_last_run_and_the_memory(world: World) -> None:
    progress = MemoryProgress(world.state)
    registry = CollectorRegistry()
    registry.register(collector(world, progress))
    world.dirty.add([4, 5], now_ms=world.clock() - 30_000)
    progress.start("run-1", now_ms=1_000_000)
    progress.enqueued("run-1", 10, last_id=99)
    progress.done("run-1", 4, errors=1, now_ms=1_001_000)
    got = samples(registry)
    run = (("run", "nightly"),)
    assert got[("graphrag_dirty_backlog", ())] == 2
    assert got[("graphrag_dirty_oldest_seconds", ())] == 30.0
    assert got[("graphrag_full_rebuild_running", run)] == 1
    assert got[("graphrag_full_rebuild_notes", (*run, ("state", "done")))] == 4
    assert got[("graphrag_full_rebuild_notes", (*run, ("state", "enqueued")))] == 10
    assert got[("graphrag_full_rebuild_errors", run)] == 1
    assert got[("graphrag_full_rebuild_started_timestamp_seconds", run)] == 1_000.0
    assert ("graphrag_full_rebuild_finished_timestamp_seconds", run) not in got
    assert got[("graphrag_redis_used_memory_bytes", ())] == 600
    assert got[("graphrag_redis_up", ())] == 1


def test_a_finished_run_has_its_end_and_an_unreadable_redis_leaves_only_its_own_gauge(
        world: World) -> None:
    progress = MemoryProgress(world.state)
    registry = CollectorRegistry()
    registry.register(collector(world, progress))
    progress.start("run-2", now_ms=5_000)
    progress.enqueued("run-2", 3, last_id=3)
    progress.dispatched("run-2", now_ms=6_000)
    progress.done("run-2", 3, errors=0, now_ms=9_000)
    got = samples(registry)
    assert got[("graphrag_full_rebuild_running", (("run", "nightly"),))] == 0
    assert got[("graphrag_full_rebuild_finished_timestamp_seconds", (("run", "nightly"),))] == 9.0
    world.state.down = True
    names = {name for name, _ in samples(registry)}
    assert names == {"graphrag_redis_up"} and samples(registry)[("graphrag_redis_up", ())] == 0
    text = generate_latest(registry).decode()
    assert "# TYPE graphrag_dirty_backlog gauge" in text  # the names stay listed
