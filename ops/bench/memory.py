"""Redis memory per snapshot, and the reverse index's share of it.

``MEMORY USAGE <key> SAMPLES 0`` of every key the batched wavefront rebuild wrote under
``<base>:main`` (2,000 foci at tokenLimit 5000), grouped by kind: ``snap`` (the snapshots), ``dep``
(the reverse index), ``shows`` and ``gen`` (the compare-and-set's bookkeeping). The layered
snapshots (``<base>:layered``, two per focus) are reported per snapshot next to them.
"""

from __future__ import annotations

from typing import Any

from ops.bench.helpers import ratio
from ops.bench.plan import Bench
from storage.redis.probe import memory_by_kind

__all__ = ["KINDS", "memory_section"]

KINDS = ("snap", "dep", "shows", "gen")


def memory_section(bench: Bench) -> dict[str, Any]:
    main = memory_by_kind(bench.client, bench.prefix("main"))
    kinds = {k: main.get(k, (0, 0)) for k in KINDS}
    total = sum(b for _, b in kinds.values())
    layered = memory_by_kind(bench.client, bench.prefix("layered")).get("snap", (0, 0))
    return {"bytes_per_snapshot": ratio(kinds["snap"][1], kinds["snap"][0]),
            "dep_index_share": ratio(kinds["dep"][1], total), "snapshots": kinds["snap"][0],
            "all_bytes_per_snapshot": ratio(total, kinds["snap"][0]),
            "by_kind": {k: {"keys": n, "bytes": b} for k, (n, b) in kinds.items()},
            "by_strategy": {"wavefront": ratio(kinds["snap"][1], kinds["snap"][0]),
                            "layered": ratio(layered[1], layered[0])}}
