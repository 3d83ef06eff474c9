"""The benchmark of issue 5 (``python -m ops.bench [--quick]``), against real MariaDB and Redis.

One run measures, side by side, on a generated Doughnut-shaped database (``graphrag_bench_<size>``,
reused when its row count matches the generator's, else reloaded with :func:`ops.generate.load`),
one module per section (every one in the table at the end), among them:

- :mod:`~ops.bench.rebuild`: snapshots/s of this one process through ``Wiring.rebuild`` (batches of
  100) over pages of 100 consecutive live ids spread over the table, and SQL statements per snapshot,
  next to a *baseline* running the same algorithm one note and one relation at a time
  (``Doughnut2025(engine, in_chunk=1)``, one focus per batch: the lazy-ORM pattern); per strategy;
- :mod:`~ops.bench.memory`: Redis ``MEMORY USAGE`` per snapshot and the reverse index's share;
- :mod:`~ops.bench.reader`: ``SnapshotReader.get`` hits (µs) next to a raw GET + ``orjson.loads``
  of the same keys, interleaved in blocks; HTTP hits against ``graphrag serve`` at a fixed rate;
- :mod:`~ops.bench.live`: single ``ContextService.compute`` calls for random live notes;
- :mod:`~ops.bench.invalidation`: a real Celery worker and ``graphrag serve``
  (:mod:`~ops.bench.services`); signed webhook to a snapshot showing the new title, for single
  edits and for a burst of 1,000 edits over 200 notes;
- :mod:`~ops.bench.scaling` (full run): ms per snapshot at 10k, 100k and 1M notes;
- :mod:`~ops.bench.profile`: the wavefront rebuild once more under cProfile.

:mod:`~ops.bench.plan` says how much of each a run does, :mod:`~ops.bench.helpers` holds every
helper more than one section uses, :mod:`~ops.bench.graph` loads the databases and builds the
wiring, ``__main__`` runs the sections in order, and :mod:`~ops.bench.report` writes
``<out>/latest.json``, ``latest.md`` and the PNG plots (:mod:`~ops.bench.report_today`,
:mod:`~ops.bench.targets`, :mod:`~ops.bench.plots`). The benchmark talks to the drivers only
through adapters (:mod:`storage.redis.probe`, :mod:`storage.database`,
:mod:`storage.profiles.admin_2025`). Every Redis key created lives under ``graphrag-bench:<run>``
and is deleted at the end; Celery gets a Redis database of its own (the first empty one of 15..8),
flushed at the end. Edited titles are restored. Progress goes to stderr. Timings are never
pass/fail tests: the report compares them to the targets.

Where each figure of ``latest.json`` is measured: a key belongs to the module of the longest entry
below that is the key itself or one of its dotted prefixes (``rebuild.full.wavefront.speedup``:
``rebuild.full``, so ops.bench.full). tests/test_bench.py checks that every top-level key of the
committed ``benchmarks/results/latest.json`` has an entry and that every module named exists::

    schema, mode, run, started_at, seconds        ops.bench.__main__     the run's head
    plan                                          ops.bench.plan         QUICK or FULL, as run
    machine, graph                                ops.bench.graph
    rebuild                                       ops.bench.rebuild      batched vs the lazy baseline
    rebuild.full, rebuild.full_speedup            ops.bench.full         full path vs batched
    rebuild.full_rows_per_snapshot_first_pieces   ops.bench.full
    rebuild.full_rows_per_snapshot                ops.bench.whole        whole runs, both models
    memory                                        ops.bench.memory
    memory.focus_context_bytes_per_snapshot       ops.bench.today
    reader                                        ops.bench.reader       in process and over HTTP
    live                                          ops.bench.live
    live.speedup_hit_vs_live                      ops.bench.__main__     live p50 / reader hit p50
    profile                                       ops.bench.profile      under cProfile
    profile.split                                 ops.bench.split        timed in place
    invalidation, invalidation_rabbitmq           ops.bench.invalidation
    invalidation_cluster                          ops.bench.cluster
    cdc, invalidation_cdc                         ops.bench.cdc          on ops.bench.binlog's server
    invalidation.stages, invalidation.floor_ms    ops.bench.stages       each topology's stages, floor
    invalidation.p95_over_floor                   ops.bench.stages
    invalidation.first_edit_over_floor            ops.bench.stages
    invalidation.first_edit_stages                ops.bench.stages       the first edit's stages
    invalidation.first_edit_over_own_floor        ops.bench.stages       over its own foci's floor
    invalidation.p95_over_own_floors              ops.bench.stages       each edit over its own floor
    invalidation.slowest_edits                    ops.bench.stages       what the slowest edits had
    cdc.mcp_notification                          ops.bench.notify
    cdc.notification_p50_ms                       ops.bench.notify
    cdc.notification_p95_ms                       ops.bench.notify
    scale                                         ops.bench.scale
    today                                         ops.bench.today
    today.full                                    ops.bench.full
    doughnut_reads                                ops.bench.doughnut_reads  Doughnut's own read
    today_scale                                   ops.bench.today_scale  the full run only
    whole                                         ops.bench.whole
    scaling                                       ops.bench.scaling

The processes the invalidation, scale and cdc sections start (a Celery worker, ``graphrag serve``,
a private broker) are :mod:`~ops.bench.services`'.
"""

from __future__ import annotations

from ops.bench.plan import FULL, QUICK, Plan

__all__ = ["FULL", "QUICK", "Plan"]
