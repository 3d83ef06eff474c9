"""What one benchmark run measures (:class:`Plan`) and its context (:class:`Bench`).

A run owns everything it creates: its Redis keys live under ``graphrag-bench:<run>`` (``Bench.base``;
each section takes a sub-prefix of its own, so sections never read each other's snapshots unless
they mean to), its databases are the disposable ``graphrag_bench_<size>``, and the titles it edits
are restored. The helpers every section shares are :mod:`ops.bench.helpers`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage.database import with_database
from worker.settings import Settings, load_settings

__all__ = [
    "EDIT_MARK",
    "FULL",
    "MAX_TOKEN_LIMIT",
    "PAGE",
    "QUICK",
    "ROOT",
    "STRATEGIES",
    "WARMUP_EDITS",
    "Bench",
    "BenchError",
    "Plan",
    "size_name",
]

#: the repository: subprocesses start here, profiles name files relative to it
ROOT = Path(__file__).resolve().parents[2]
STRATEGIES = ("wavefront", "layered")
MAX_TOKEN_LIMIT = 5000
#: titles the invalidation section writes start with this (a database holding one is reloaded)
EDIT_MARK = "bench-edit"
#: foci per page: the nightly rebuild's paging, and the batch size of a batched rebuild
PAGE = 100
#: the first single edits, while the worker processes build their runtime, are reported apart
WARMUP_EDITS = 4


class BenchError(Exception):
    """The benchmark cannot go on (a service missing, a subprocess that did not start, ...)."""


@dataclass(frozen=True)
class Plan:
    """How much of everything one run measures."""

    main_size: int = 100_000
    scaling_sizes: tuple[int, ...] = ()
    rebuild_notes: int = 2_000
    baseline_notes: int = 100
    reads: int = 20_000
    http_rate: int = 300
    http_seconds: float = 5.0
    live_notes: int = 200
    profile_notes: int = 500
    edits: int = 30
    edit_timeout_s: float = 15.0
    burst_notes: int = 200
    burst_edits: int = 1_000
    burst_timeout_s: float = 60.0
    scaling_notes: int = 2_000
    drain_notes: int = 4_000
    #: live notes of the first pieces both rebuild paths compute side by side (ops.bench.full)
    full_notes: int = 4_000
    #: the notes of the graphs of both models rebuilt whole by both paths (ops.bench.whole)
    whole_size: int = 10_000
    #: notes of the largest 2026 graph the nightly section rebuilds with 1 and 2 processes (0: all;
    #: ops.bench.today_scale); the quick run measures no such size
    nightly_notes: int = 0


QUICK = Plan()
FULL = Plan(scaling_sizes=(10_000, 100_000, 1_000_000), rebuild_notes=5_000, baseline_notes=300,
            reads=50_000, http_seconds=10.0, live_notes=500, profile_notes=2_000, edits=60,
            burst_timeout_s=300.0, drain_notes=10_000, full_notes=10_000,
            nightly_notes=50_000)

def size_name(size: int) -> str:
    """``100k``, ``1m``, ``2500``: the suffix of a bench database's name."""
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}m"
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


@dataclass
class Bench:
    """One run: options, its Redis client (opaque: only :mod:`storage.redis` calls it) and key
    prefix, samples for the plots."""

    plan: Plan
    mysql_url: str
    redis_url: str
    client: Any
    seed: int = 0
    amqp_url: str = "amqp://guest:guest@127.0.0.1:5672"
    #: the snapshots in a Redis Cluster (``redis_url`` names a node); the broker on ``broker_redis_url``
    redis_cluster: bool = False
    broker_redis_url: str | None = None
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    samples: dict[str, list[float]] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"graphrag-bench:{self.run}"

    def prefix(self, name: str) -> str:
        """The key prefix of one section's snapshots."""
        return f"{self.base}:{name}"

    def db_url(self, size: int) -> str:
        return with_database(self.mysql_url, f"graphrag_bench_{size_name(size)}")

    def settings(self, size: int, name: str, strategy: str = "wavefront") -> Settings:
        """Settings of a process keeping ``strategy`` snapshots under :meth:`prefix` ``(name)``."""
        return load_settings(database_url=self.db_url(size), redis_url=self.redis_url,
                             redis_cluster=self.redis_cluster, redis_prefix=self.prefix(name),
                             strategies=strategy,
                             max_token_limit=MAX_TOKEN_LIMIT)


