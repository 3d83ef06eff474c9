"""Scale-out: how fast real Celery worker processes drain the dirty set, one process against two.

Each run starts a Celery worker with ``--concurrency N`` (N processes, queue ``realtime``) on the
graph's database and a snapshot prefix of its own, warms every process up (a small drain builds
each process's runtime: engine, tokenizer), then marks ``drain_notes`` foci dirty at once, sends
one ``graphrag.drain`` task and times until the dirty set is empty. Drains spread over the dirty
set's shards (docs/architecture.md, "Draining"), so N processes drain N shards at once; the ratio
of the two throughputs is the speedup a second process (here: the machine's second core) buys.
Database and Redis run on the same machine and share its cores with the workers.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from celery import Celery

from ops.bench.graph import Graph, wiring_for
from ops.bench.helpers import ratio, say, wait_for
from ops.bench.plan import Bench, BenchError
from ops.bench.services import (
    claimed_broker,
    credentials,
    process_group,
    says_ready,
    service_env,
    worker_command,
)
from worker.compose import Wiring

__all__ = ["drain_throughput", "scale_section"]

_WARMUP_NOTES = 400
_TIMEOUT_S = 600.0
#: How often the end of a drain is polled: 48 ``ZCARD`` (16 shards, three lanes) per poll; every
#: 10 ms that took a tenth of a core from the processes measured (bench and Redis), on 2 cores.
#: 50 ms costs at most 0.5% of a 10-s drain in resolution.
_POLL_S = 0.05


@contextlib.contextmanager
def _worker(bench: Bench, graph: Graph, name: str, processes: int) -> Iterator[Celery]:
    """A worker of ``processes`` processes keeping snapshots under ``<base>:<name>``; yields a
    Celery client on its broker (to send it tasks)."""
    with claimed_broker(bench.redis_url) as broker, \
            tempfile.TemporaryDirectory(prefix="graphrag-bench-") as tmp:
        env = service_env(bench, graph, broker.url, *credentials(), prefix=bench.prefix(name))
        log = Path(tmp) / "worker.log"
        with process_group(worker_command(bench, processes), env, log, partial(says_ready, log),
                           f"a Celery worker of {processes} processes"):
            client = Celery(broker=broker.url)
            try:
                yield client
            finally:
                client.close()


def _drain(wiring: Wiring, client: Celery, ids: list[int]) -> float:
    """Seconds from marking ``ids`` dirty and sending one drain until the dirty set is empty."""
    started = time.perf_counter()
    wiring.dirty.add(ids, now_ms=0)
    client.send_task("graphrag.drain", queue="realtime")
    if not wait_for(lambda: wiring.dirty.size() == 0, _TIMEOUT_S, _POLL_S):
        raise BenchError(f"the dirty set did not empty within {_TIMEOUT_S:.0f} s")
    return time.perf_counter() - started


def drain_throughput(bench: Bench, graph: Graph, ids: list[int], processes: int) -> dict[str, Any]:
    """Snapshots per second a worker of ``processes`` processes drains ``ids`` at. The warm-up
    drains other notes (the far end of the table), so no process starts the measurement with the
    measured notes' data already loaded (service.carry)."""
    name = f"scale{processes}"
    wiring = wiring_for(bench, graph, name)
    with _worker(bench, graph, name, processes) as client:
        for _ in range(processes):  # every process builds its runtime outside the measurement
            _drain(wiring, client, graph.ids[-_WARMUP_NOTES:])
        seconds = _drain(wiring, client, ids)
    snapshots = len(ids) * len(wiring.settings.seeds)
    say(f"drain with {processes} worker process(es): {snapshots / seconds:.0f} snapshots/s "
        f"({len(ids)} foci in {seconds:.1f} s)")
    return {"processes": processes, "foci": len(ids), "snapshots": snapshots,
            "seconds": round(seconds, 3), "snapshots_per_s": snapshots / seconds}


def scale_section(bench: Bench, graph: Graph) -> dict[str, Any]:
    """Drain throughput with one and with two worker processes, and the speedup."""
    ids = graph.ids[: bench.plan.drain_notes]
    runs = {n: drain_throughput(bench, graph, ids, n) for n in (1, 2)}
    per_s = {n: run["snapshots_per_s"] for n, run in runs.items()}
    return {"drain_snapshots_per_s_1": per_s[1], "drain_snapshots_per_s_2": per_s[2],
            "drain_speedup_2_vs_1": ratio(per_s[2], per_s[1]), "runs": list(runs.values()),
            "dirty_shards": wiring_for(bench, graph, "scale1").settings.dirty_shards}
