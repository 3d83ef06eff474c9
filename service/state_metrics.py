"""Gauges read from Redis at each scrape: the dirty backlog, the full rebuilds' progress, the cache's
memory. ``graphrag worker``'s metrics endpoint serves them (worker.celery.metrics).

They describe shared state, not a process: every worker replica reports the same values, so the
alert rules and the dashboard take their ``max`` over instances. Each scrape reads Redis a few
times (the dirty shards in one pipeline, two progress hashes, ``INFO memory``) and caches nothing,
so a value is never older than the scrape. When the cache Redis does not answer, the scrape still
succeeds: ``graphrag_redis_up`` is 0 and the other families carry no sample. Every family is
always listed, so a scrape shows the names even before a full rebuild has ever run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from graphrag import GraphRagError
from service.ports import DirtyQueue, ProgressLog

__all__ = ["MemoryUse", "StateCollector"]


@dataclass(frozen=True, slots=True)
class MemoryUse:
    """The cache Redis's ``used_memory`` and ``maxmemory`` in bytes (0: no limit); on a cluster,
    the primary nearest its limit."""

    used_bytes: int
    max_bytes: int


class StateCollector(Collector):
    """The gauges of the module docstring, from ``dirty``, the ``progress`` logs by run name
    (``nightly``: the nightly and queued runs; ``manual``: ``graphrag rebuild --all`` in process) and
    ``memory``; ``clock_ms`` is the epoch in milliseconds."""

    def __init__(self, dirty: DirtyQueue, progress: Mapping[str, ProgressLog],
                 memory: Callable[[], MemoryUse], clock_ms: Callable[[], int]) -> None:
        self.dirty, self.progress, self.memory, self.clock_ms = dirty, progress, memory, clock_ms

    def describe(self) -> list[Metric]:
        return []  # collected only at a scrape, never when the collector is registered

    def collect(self) -> Iterator[Metric]:
        families = _families()
        up = GaugeMetricFamily("graphrag_redis_up", "1 when the cache Redis answered this scrape")
        try:
            self._fill(families)
            up.add_metric([], 1.0)
        except GraphRagError:
            families = _families()  # nothing half-read
            up.add_metric([], 0.0)
        yield up
        yield from families.values()

    def _fill(self, families: dict[str, GaugeMetricFamily]) -> None:
        now_ms = self.clock_ms()
        families["backlog"].add_metric([], float(self.dirty.size()))
        oldest = self.dirty.oldest_ms()
        families["oldest"].add_metric([], 0.0 if oldest is None else max(0.0, now_ms - oldest) / 1000)
        for run, log in self.progress.items():
            _progress(families, run, log.status())
        memory = self.memory()
        families["used"].add_metric([], float(memory.used_bytes))
        families["max"].add_metric([], float(memory.max_bytes))


def _families() -> dict[str, GaugeMetricFamily]:
    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"graphrag_{name}", doc, labels=list(labels))

    run = ("run",)
    return {
        "backlog": gauge("dirty_backlog", "Foci waiting in the dirty set (every lane and shard)"),
        "oldest": gauge("dirty_oldest_seconds", "Seconds since the longest-waiting focus was marked "
                        "dirty (0: none waits)"),
        "running": gauge("full_rebuild_running", "1 while the last full rebuild has not finished",
                         run),
        "notes": gauge("full_rebuild_notes", "Notes of the last full rebuild, handed out "
                       "(enqueued) and rebuilt (done)", ("run", "state")),
        "errors": gauge("full_rebuild_errors", "Notes of the last full rebuild that failed", run),
        "started": gauge("full_rebuild_started_timestamp_seconds", "When the last full rebuild "
                         "started (Unix time)", run),
        "finished": gauge("full_rebuild_finished_timestamp_seconds", "When the last full rebuild "
                          "finished (Unix time; no sample while it runs)", run),
        "used": gauge("redis_used_memory_bytes", "The cache Redis's used_memory"),
        "max": gauge("redis_maxmemory_bytes", "The cache Redis's maxmemory (0: no limit)"),
    }


def _progress(families: dict[str, GaugeMetricFamily], run: str,
              status: Mapping[str, int | str]) -> None:
    """The samples of one progress log's last run (none when no run is recorded)."""
    if "startedAt" not in status:
        return
    finished = status.get("finishedAt")
    families["running"].add_metric([run], 0.0 if finished else 1.0)
    for state in ("enqueued", "done"):
        families["notes"].add_metric([run, state], float(status.get(state, 0)))
    families["errors"].add_metric([run], float(status.get("errors", 0)))
    families["started"].add_metric([run], int(status["startedAt"]) / 1000)
    if finished:
        families["finished"].add_metric([run], int(finished) / 1000)
