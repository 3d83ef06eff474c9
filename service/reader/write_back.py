"""Writing a reader's computed snapshot back, and putting its note back when that may be wrong.

A read that missed (or found its snapshot outdated) computes the snapshot-sized answer under the
snapshot's lock (service.reader.live) and stores it here through the cache's compare-and-set, as a
rebuild stores its writes (service.rebuild). The invariants, each argued from the order of steps:

* **A write never replaces a newer snapshot.** The compare-and-set accepts it only against the
  generation read before the computation; a refused write changes nothing, and its note is put
  back for a drain (:meth:`WriteBack.write`), because whoever moved the generation may not queue
  it (a webhook's outdating never does).
* **A snapshot that may show what an edit changed is never served as current.** The edit ``seq``
  was read before the database (docs/redis.md); if it moved during the computation, or if Redis
  did not say whether it did, the written snapshot is outdated at once (its generation bumped:
  the next read computes again) and put back for a drain, which rewrites it.
* **A write whose reply was lost counts as written.** Redis may have applied it, so the note is
  outdated and put back as after a race; nothing here raises: the read already has its answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from graphrag.core.errors import CacheUnavailable
from service.envelope import Envelope
from service.metrics import ReaderMetrics
from service.ports import SnapshotCache
from service.rebuild import raced

__all__ = ["WriteBack"]

log = logging.getLogger("graphrag.reader")


class WriteBack:
    """Stores a reader's snapshot through the CAS; ``on_raced`` puts a note back for a drain."""

    def __init__(self, store: SnapshotCache, metrics: ReaderMetrics,
                 on_raced: Callable[[int], object] | None) -> None:
        self.store, self.metrics, self.on_raced = store, metrics, on_raced

    def write(self, envelope: Envelope, seq: int | None) -> None:
        """CAS-write; then, like a rebuild, redo the focus if an edit raced the computation: it is
        outdated at once (the next read computes again) and put back for a drain. A refused write
        is put back too (nothing to outdate): whoever moved the generation may not queue it."""
        try:
            if not self.store.write_many([envelope])[0]:
                self.metrics.cas_rejections.inc()
                self._put_back(envelope.note_id)
                return
        except CacheUnavailable as err:  # Redis may have applied it before the reply was lost
            self._redis_error("could not write back note %s: %s", envelope.note_id, err)
            self._outdate(envelope.note_id)
            return
        if seq is None or self._raced(envelope, seq):
            self._outdate(envelope.note_id)

    def _raced(self, envelope: Envelope, seq: int) -> bool:
        """Whether an edit raced the computation; a check Redis did not answer counts as raced,
        since the snapshot now written may show what such an edit changed."""
        try:
            return bool(raced(self.store, [envelope], seq))
        except CacheUnavailable as err:
            self._redis_error("could not check note %s for a racing edit: %s", envelope.note_id, err)
            return True

    def _outdate(self, note_id: int) -> None:
        try:
            self.store.bump_generations([note_id])
        except CacheUnavailable as err:  # still put back: a drain rewrites it once Redis answers
            self._redis_error("could not outdate note %s: %s", note_id, err)
        self._put_back(note_id)

    def _put_back(self, note_id: int) -> None:
        try:
            if self.on_raced is not None:
                self.on_raced(note_id)
        except CacheUnavailable as err:
            self._redis_error("could not put note %s back for a rebuild: %s", note_id, err)

    def _redis_error(self, message: str, note_id: int, err: CacheUnavailable) -> None:
        self.metrics.redis_errors.inc()
        log.warning(message, note_id, err)
