"""``graphrag worker``'s Prometheus endpoint, on ``GRAPHRAG_WORKER_METRICS_PORT`` (none by default).

A worker is a main process and a pool of processes (Celery's prefork) that run the tasks and count
what they do (tasks.runtime: drain batches, snapshots rebuilt, dirty-to-fresh latency).
prometheus_client's multiprocess mode adds those up: each pool process writes its values to files
of its own in one directory, and the main process serves ``/metrics`` over all of them, beside the
gauges it reads from Redis at each scrape (service.state_metrics: backlog, full rebuilds, memory).

Invariants:

* The directory is named (``PROMETHEUS_MULTIPROC_DIR``) before anything imports prometheus_client,
  which picks where values live once, at its import: :func:`prepare` refuses to run after it, and
  this module imports the library only inside :func:`serve`.
* The directory is this worker's own, made fresh at start and removed when its main process exits:
  a restarted worker starts its counters at 0 (a reset, which ``rate()`` handles) and never adds up
  another worker's files.
* A pool process that exits leaves its files, so what it counted stays in the totals: counters
  never go down while the worker lives.
* The endpoint starts in the main process once the pool is up (``worker_ready``), so the pool
  processes forked at start hold no copy of its listening socket.

``celery -A worker.celery.app worker`` serves no metrics: the endpoint is ``graphrag worker``'s.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile

from celery.signals import worker_ready

from graphrag.core.errors import ConfigurationError
from worker.settings import Settings

__all__ = ["prepare", "serve"]

log = logging.getLogger("graphrag.worker")
ENV = "PROMETHEUS_MULTIPROC_DIR"


def prepare(settings: Settings) -> None:
    """With a metrics port: name a fresh multiprocess directory and serve it once the worker is
    ready. Call it before the worker's modules are imported."""
    if settings.worker_metrics_port is None:
        return
    if "prometheus_client" in sys.modules:
        raise ConfigurationError("GRAPHRAG_WORKER_METRICS_PORT: prometheus_client was imported "
                                 "before the worker chose where its processes count")
    directory = tempfile.mkdtemp(prefix="graphrag-worker-metrics-")
    atexit.register(_remove, directory, os.getpid())
    os.environ[ENV] = directory
    worker_ready.connect(lambda **_: serve(settings, directory), weak=False)


def _remove(directory: str, owner: int) -> None:
    if os.getpid() == owner:  # a forked child that ran exit handlers leaves it alone
        shutil.rmtree(directory, ignore_errors=True)


def serve(settings: Settings, directory: str) -> None:
    """Serve every pool process's counts and the state gauges on the configured port."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    from service.state_metrics import StateCollector
    from storage.redis.memory import memory_use
    from worker.compose import Wiring, wall_ms

    wiring = Wiring(settings)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    registry.register(StateCollector(
        wiring.dirty, {"nightly": wiring.progress("nightly"), "manual": wiring.progress("manual")},
        lambda: memory_use(wiring.client), wall_ms))
    start_http_server(settings.worker_metrics_port or 0, registry=registry)
    log.info("metrics on port %s (/metrics)", settings.worker_metrics_port)
