"""The benchmark of issue 5 (``python -m ops.bench [--quick]``), against real MariaDB and Redis.

One run measures, side by side, on a generated Doughnut-shaped database (``graphrag_bench_<size>``,
reused when its row count matches the generator's, else reloaded with :func:`ops.generate.load`),
one module per section:

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

:mod:`~ops.bench.plan` says how much of each a run does, :mod:`~ops.bench.graph` loads the
databases and builds the wiring, ``__main__`` runs the sections in order, and
:mod:`~ops.bench.report` writes ``<out>/latest.json``, ``latest.md`` and the PNG plots. The
benchmark talks to the drivers only through adapters (:mod:`storage.redis.probe`,
:mod:`storage.database`, :mod:`storage.profiles.admin_2025`). Every Redis key created lives under
``graphrag-bench:<run>`` and is deleted at the end; Celery gets a Redis database of its own (the
first empty one of 15..8), flushed at the end. Edited titles are restored. Progress goes to stderr.
Timings are never pass/fail tests: the report compares them to the targets.
"""

from __future__ import annotations

from ops.bench.plan import FULL, QUICK, Plan

__all__ = ["FULL", "QUICK", "Plan"]
