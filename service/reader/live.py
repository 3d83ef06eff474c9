"""Reads no snapshot can answer: computed live, once per snapshot under its lock, and written back.

The reader (service.reader.snapshot) comes here on a miss, for an outdated snapshot, for another
viewer's read that no snapshot is proven to answer, and whenever the cache cannot be asked or
trusted. Invariants:

* **One computation per snapshot at a time** (:meth:`LiveReads.once`). Readers that miss the same
  snapshot race for a short lock (``lock_ttl_ms``); the holder computes and writes back, the others
  wait for it (``lock_wait_ms`` at most) and then read what it wrote. A waiter that timed out, or
  finds nothing usable after the lock, computes itself: waiting bounds the load, never the answer.
* **What is written is the snapshot's shape, what is answered is the ask's.** A write-back computes
  the stored tokenLimit (a trace strategy's ready limit, traversed at the maximum) and answers the
  ask from it exactly as a later hit would (service.answers); a read that writes nothing computes
  just the ask (a trace traversal sized for it).
* **Only the owner's view and the stored shape are ever written.** A viewer's read, a deleted
  note's read on Doughnut's paths, an ask no snapshot is kept for, and a read while the cache is
  down or not trusted are computed with ``write=False`` and never stored.
* **The generation and the edit ``seq`` are read before the database**, so a write-back can be
  refused or outdated when an edit raced it (service.reader.write_back); either read failing
  counts as the oldest value (0, or no ``seq``: outdated at once).
* **A database that cannot answer is** :class:`Unavailable` naming the note, so the reader can
  fall back on any snapshot it holds; a note-level error (not found, not readable) is raised as is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from graphrag import DatabaseUnavailable, GraphRagError, Request, get_strategy
from graphrag.core.errors import CacheUnavailable, Unavailable
from service.answers import Ask, envelope_body, outcome_body
from service.context import ContextService
from service.decoding import decode_envelope
from service.envelope import Envelope
from service.metrics import ReaderMetrics
from service.ports import Coordination, Lease, SnapshotCache
from service.reader.served import ReaderConfig, Served, as_served, usable
from service.reader.write_back import WriteBack

__all__ = ["LiveReads"]

log = logging.getLogger("graphrag.reader")


class LiveReads:
    """Computes what no snapshot answers; ``fresh(envelope, now_ms)`` is the reader's freshness
    test (applied again after the lock), ``config_hashes`` what a written snapshot carries."""

    def __init__(self, service: ContextService, store: SnapshotCache, coordination: Coordination,
                 config: ReaderConfig, *, metrics: ReaderMetrics, clock_ms: Callable[[], int],
                 config_hashes: dict[str, str], fresh: Callable[[Envelope, int], bool],
                 write_back: WriteBack) -> None:
        self.service, self.store, self.coordination, self.config = service, store, coordination, config
        self.metrics, self.clock_ms, self.config_hashes = metrics, clock_ms, config_hashes
        self.fresh, self.write_back = fresh, write_back

    def once(self, ask: Ask) -> Served:
        """Compute under the snapshot's lock; waiters read what the holder wrote."""
        lease = self.coordination.snapshot_lock(ask.key, ttl_ms=self.config.lock_ttl_ms)
        try:
            acquired = lease.acquire()
            if not acquired:
                self.metrics.lock_waits.inc()
                acquired = lease.acquire(wait_ms=self.config.lock_wait_ms)
        except CacheUnavailable as err:
            self.metrics.redis_errors.inc()
            log.warning("cache lock unavailable for note %s: %s", ask.note_id, err)
            return self.compute(ask, write=False)
        return self._locked(ask, lease if acquired else None)

    def _locked(self, ask: Ask, lease: Lease | None) -> Served:
        try:
            return self._after_lock(ask)
        finally:
            if lease is not None:
                lease.release()

    def _after_lock(self, ask: Ask) -> Served:
        try:
            raw, generation = self.store.read_current(ask.key)
        except CacheUnavailable:
            raw, generation = None, 0
        envelope = usable(decode_envelope(raw), ask, self.service.database())
        if (envelope is not None and envelope.generation >= generation
                and self.fresh(envelope, self.clock_ms())):
            self.metrics.hits.inc()
            at_ms = envelope.computed_at_ms  # another reader's write-back: age 0 as before
            return as_served(envelope_body(envelope, ask), "cache", at_ms, at_ms)
        return self.compute(ask, write=True)

    def _request(self, ask: Ask, now_ms: int, *, write: bool) -> Request:
        """What to compute: the snapshot's shape when writing it back, else just the ask (a trace
        strategy's traversal is then sized for the asked tokenLimit only)."""
        top = self.config.max_token_limit
        if write and ask.traced:
            spec = get_strategy(ask.strategy)
            ready = min(spec.default_token_limit or top, top)
            return Request(ask.note_id, ask.seed, ready, now_ms,
                           traversal_token_limit=spec.stored_limit(top))
        size = ask.stored_limit if write and ask.stored_limit is not None else ask.token_limit
        traversal = size if ask.traced else max(size, top)
        return Request(ask.note_id, ask.seed, size, now_ms, traversal_token_limit=traversal,
                       viewer=ask.viewer, read_deleted=ask.read_deleted)

    def compute(self, ask: Ask, *, write: bool) -> Served:
        """Compute now; with ``write``, store the snapshot-sized result through the CAS."""
        generation = self._generation(ask.note_id) if write else 0
        seq = self.edit_seq() if write else None  # read before the database (docs/redis.md)
        request = self._request(ask, self.clock_ms(), write=write)
        started = time.perf_counter()
        outcome, view = self._compute(request, ask.strategy)
        self.metrics.live_latency_s.observe(time.perf_counter() - started)
        self.metrics.live_computes.inc()
        if not write:
            return as_served(outcome_body(outcome, ask), "live", request.now_ms, request.now_ms)
        try:
            database = self.service.stamp()
        except (CacheUnavailable, DatabaseUnavailable) as err:  # served, not written: no guess
            log.warning("note %s computed live, not written back: %s", ask.note_id, err)
            return as_served(outcome_body(outcome, ask), "live", request.now_ms, request.now_ms)
        envelope = Envelope.of(outcome, view, request, strategy=ask.strategy, generation=generation,
                               computed_at_ms=request.now_ms,
                               config_hash=self.config_hashes[ask.strategy], database=database)
        self.write_back.write(envelope, seq)
        return as_served(envelope_body(envelope, ask), "live", request.now_ms, request.now_ms)

    def view(self, ask: Ask) -> Envelope:
        """``ask``'s viewer's own view, computed now at the snapshot's traversal limit (so that it
        answers every tokenLimit the snapshot does) and never written (service.reader.viewer_reads)."""
        spec, top = get_strategy(ask.strategy), self.config.max_token_limit
        ready = min(spec.default_token_limit or top, top)
        request = Request(ask.note_id, ask.seed, ready, self.clock_ms(),
                          traversal_token_limit=spec.stored_limit(top), viewer=ask.viewer)
        started = time.perf_counter()
        outcome, view = self._compute(request, ask.strategy)
        self.metrics.live_latency_s.observe(time.perf_counter() - started)
        self.metrics.live_computes.inc()
        return Envelope.of(outcome, view, request, strategy=ask.strategy, generation=0,
                           computed_at_ms=request.now_ms, config_hash=self.config_hashes[ask.strategy])

    def edit_seq(self) -> int | None:
        """The edit sequence, read before a computation reads the database; None when the cache
        cannot say (what is computed then is never kept)."""
        try:
            return self.store.current_seq()
        except CacheUnavailable:
            return None

    def _generation(self, note_id: int) -> int:
        try:
            return self.store.generations([note_id])[note_id]
        except CacheUnavailable:
            return 0

    def _compute(self, request: Request, strategy: str) -> tuple[Any, Any]:
        try:
            computed = self.service.compute_many([request], strategy)
        except DatabaseUnavailable as err:
            self.metrics.database_errors.inc()
            raise Unavailable(f"no snapshot of note {request.focus_id} and {err}") from err
        result = computed.results[request]
        if isinstance(result, GraphRagError):
            raise result
        return result, computed.view
