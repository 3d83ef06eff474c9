"""How much cache Redis a site needs: live notes × snapshots per note × bytes per snapshot.

The bytes per snapshot are the benchmark's (docs/capacity.md, ``B``: the snapshot with its reverse
index entries; 7,640 B for a 2025 tree snapshot at tokenLimit 5000, 12,840 B for a packed
focus-context one), and :data:`HEADROOM` covers what else the prefix holds (generations, edit
stamps, the dirty set) and the allocator's fragmentation. A snapshot evicted is a read computed
live on Doughnut's database, so a ``maxmemory`` below the need turns the cache into a load on it.
"""

from __future__ import annotations

from collections.abc import Sequence

from graphrag import get_strategy

__all__ = ["BYTES_PER_SNAPSHOT", "HEADROOM", "needed_bytes", "snapshots_per_note"]

BYTES_PER_SNAPSHOT = {"tree": 7_640, "wiki": 12_840}
HEADROOM = 1.3


def snapshots_per_note(strategies: Sequence[str], seeds: Sequence[int],
                       layered_limits: Sequence[int]) -> int:
    """Snapshots a rebuild writes per note: per seed, per configured limit for the per-limit
    strategies, plus the seedless order for the trace strategies (service.rebuild)."""
    total = 0
    for name in strategies:
        limits = get_strategy(name).limits
        per_seed = len(layered_limits) if limits == "per-limit" else 1
        total += per_seed * len(seeds) + (1 if limits == "trace" else 0)
    return total


def needed_bytes(notes: int, model: str, snapshots: int) -> int:
    """The ``maxmemory`` a site of ``notes`` live notes needs, headroom included."""
    return int(notes * snapshots * BYTES_PER_SNAPSHOT[model] * HEADROOM)
