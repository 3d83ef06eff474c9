"""The thin reader: serve a snapshot from the cache, compute live only on a miss (docs/redis.md).

``get`` on a fresh hit is one cache read (the snapshot and its note's generation, one MGET), one
decode and a prefix slice: no SQL, no second round trip. A snapshot older than its note's generation
is *outdated* (an event that affects it was processed after it was computed, and its rebuild is
queued): it is never served while the database answers, the answer is computed as on a miss. Past
the soft TTL (or under another configuration) the snapshot is served *stale* and one refresh per
note is queued. On a miss one reader computes under a short per-snapshot lock and writes
the result back through the compare-and-set; the others wait for it (bounded) and then read it.
Cache down: compute live and say so; database down: serve any snapshot, however old; both down:
:class:`Unavailable`.

One module per thing the reader decides, each arguing its own invariants:

* :mod:`service.reader.served`: what a read returns, and which snapshot can answer which read;
* :mod:`service.reader.snapshot`: :class:`SnapshotReader`, which answer a read gets (a hit, stale,
  outdated, another viewer's, the feed behind, a miss);
* :mod:`service.reader.viewer_reads`: another viewer's read of a current snapshot (the owner's
  bytes, a refusal, or their own view, remembered while access holds);
* :mod:`service.reader.live`: what no snapshot answers, computed once per snapshot under its lock;
* :mod:`service.reader.write_back`: storing that through the compare-and-set, and putting a note
  back for a drain when an edit raced it.
"""

from __future__ import annotations

from graphrag.core.errors import Unavailable
from service.reader.served import ReaderConfig, Served
from service.reader.snapshot import SnapshotReader

__all__ = ["ReaderConfig", "Served", "SnapshotReader", "Unavailable"]
