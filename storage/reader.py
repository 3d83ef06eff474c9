"""The thin reader: serve a snapshot from Redis, compute live only on a miss (DESIGN §4, §7).

``get`` on a fresh hit is one GET, one decode and a prefix slice: no SQL, no second round trip. Past
the soft TTL (or under another configuration) the snapshot is served *stale* and one refresh per note
is queued. On a miss one reader computes under a short per-snapshot lock and writes the result back
through the compare-and-set; the others wait for it (bounded) and then read it. Redis down: compute
live and say so; database down: serve any snapshot, however old; both down: :class:`Unavailable`.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import orjson
from redis.exceptions import LockError, RedisError
from redis.lock import Lock

from graphrag import (
    STRATEGIES,
    DatabaseUnavailable,
    GraphRagError,
    GraphView,
    InvalidParameter,
    Outcome,
    Request,
    config_hash,
    slice_result,
)
from graphrag.params import MAX_NOTE_ID, MAX_TOKEN_LIMIT_CEILING
from storage.context import ContextService
from storage.metrics import ReaderMetrics
from storage.snapshots import (
    PER_LIMIT_STRATEGIES,
    CacheUnavailable,
    Envelope,
    SnapshotStore,
    decode_envelope,
)

__all__ = ["ReaderConfig", "Served", "SnapshotReader", "Unavailable"]

log = logging.getLogger("graphrag.reader")
Source = Literal["cache", "stale", "live"]


class Unavailable(GraphRagError):
    """Neither a snapshot nor the database can answer (HTTP 503)."""


@dataclass(frozen=True, slots=True)
class ReaderConfig:
    """What snapshots exist: strategies, seeds, the maximum tokenLimit and layered's limits."""

    strategies: tuple[str, ...] = ("wavefront",)
    seeds: tuple[int, ...] = (0,)
    max_token_limit: int = 5000
    layered_limits: tuple[int, ...] = (2500, 5000)
    lock_ttl_ms: int = 10_000
    lock_wait_ms: int = 3_000
    refresh_claim_s: int = 300


@dataclass(frozen=True, slots=True)
class Served:
    """A GraphRAGResult and where it came from; ``age_s`` = seconds since it was computed."""

    body: bytes
    source: Source
    age_s: float


@dataclass(frozen=True, slots=True)
class _Ask:
    note_id: int
    strategy: str
    seed: int
    token_limit: int
    stored_limit: int | None  # the tokenLimit of the snapshot that can answer; None: live only

    @property
    def key_limit(self) -> int | None:
        return self.stored_limit if self.strategy in PER_LIMIT_STRATEGIES else None


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class SnapshotReader:
    """Serves GraphRAGResults; see the module docstring for the paths."""

    def __init__(
        self, service: ContextService, store: SnapshotStore, config: ReaderConfig, *,
        metrics: ReaderMetrics | None = None, on_stale: Callable[[int], None] | None = None,
        on_raced: Callable[[int], object] | None = None,
        clock_ms: Callable[[], int] = _wall_ms, rng: random.Random | None = None,
    ) -> None:
        self.service, self.store, self.config = service, store, config
        self.metrics = metrics or ReaderMetrics.create()
        self.on_stale, self.on_raced, self.clock_ms = on_stale, on_raced, clock_ms
        self.rng = rng or random.Random()
        self.config_hash = config_hash(service.params, service.counter.name)
        self._latency = {source: self.metrics.read_latency_s.labels(source)
                         for source in ("cache", "stale", "live")}

    # -- the public call ------------------------------------------------------------------------
    def get(
        self, note_id: int, *, token_limit: int | None = None, seed: int | None = None,
        strategy: str | None = None,
    ) -> Served:
        """The GraphRAGResult of ``note_id``; raises InvalidParameter, NoteNotFound, Unavailable."""
        started = time.perf_counter()
        served = self._serve(self._ask(note_id, token_limit, seed, strategy))
        self._latency[served.source].observe(time.perf_counter() - started)
        return served

    def _ask(self, note_id: int, token_limit: int | None, seed: int | None,
             strategy: str | None) -> _Ask:
        c = self.config
        if isinstance(note_id, bool) or not isinstance(note_id, int) or not 0 <= note_id <= MAX_NOTE_ID:
            raise InvalidParameter("noteId", f"must be an integer from 0 to {MAX_NOTE_ID}")
        limit = c.max_token_limit if token_limit is None else token_limit
        ceiling = MAX_TOKEN_LIMIT_CEILING
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= ceiling:
            raise InvalidParameter("tokenLimit", f"must be an integer from 1 to {ceiling}")
        name = c.strategies[0] if strategy is None else strategy
        if name not in STRATEGIES:
            raise InvalidParameter("strategy", f"unknown strategy {name!r}; choose from {STRATEGIES}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise InvalidParameter("seed", "must be an integer")
        if seed is not None and seed not in c.seeds:
            raise InvalidParameter("seed", f"unknown seed {seed}; configured seeds are {c.seeds}")
        chosen = self.rng.choice(c.seeds) if seed is None else seed
        return _Ask(note_id, name, chosen, limit, self._stored_limit(name, limit))

    def _stored_limit(self, strategy: str, token_limit: int) -> int | None:
        c = self.config
        if strategy not in c.strategies:
            return None
        if strategy in PER_LIMIT_STRATEGIES:
            return token_limit if token_limit in c.layered_limits else None
        return c.max_token_limit if token_limit <= c.max_token_limit else None

    # -- paths ----------------------------------------------------------------------------------
    def _serve(self, ask: _Ask) -> Served:
        if ask.stored_limit is None:
            return self._live(ask, write=False)
        try:
            raw = self.store.read(ask.note_id, ask.strategy, ask.seed, ask.key_limit)
        except CacheUnavailable as err:
            self.metrics.redis_errors.inc()
            log.warning("redis unavailable, computing note %s live: %s", ask.note_id, err)
            return self._live(ask, write=False)
        envelope = self._usable(decode_envelope(raw), ask)
        if envelope is None:
            self.metrics.misses.inc()
            return self._compute_once(ask)
        return self._cached(envelope, ask)

    def _usable(self, envelope: Envelope | None, ask: _Ask) -> Envelope | None:
        """The envelope if it can answer this ask at all (fresh or stale); None is a miss."""
        if envelope is None or envelope.note_id != ask.note_id or envelope.seed != ask.seed:
            return None
        if envelope.strategy != ask.strategy or envelope.max_token_limit < ask.token_limit:
            return None
        if ask.token_limit < envelope.max_token_limit and not envelope.sliceable:
            return None
        return envelope

    def _cached(self, envelope: Envelope, ask: _Ask) -> Served:
        now_ms = self.clock_ms()
        age_s = max(0.0, (now_ms - envelope.computed_at_ms) / 1000)
        if self.store.is_fresh(envelope, now_ms, self.config_hash):
            self.metrics.hits.inc()
            return Served(self._body(envelope, ask.token_limit), "cache", age_s)
        self.metrics.stale.inc()
        self._queue_refresh(ask.note_id)
        return Served(self._body(envelope, ask.token_limit), "stale", age_s)

    def _queue_refresh(self, note_id: int) -> None:
        if self.on_stale is None:
            return
        try:
            if self.store.claim_refresh(note_id, ttl_s=self.config.refresh_claim_s):
                self.on_stale(note_id)
        except GraphRagError as err:
            log.warning("could not queue a refresh of note %s: %s", note_id, err)

    @staticmethod
    def _body(envelope: Envelope, token_limit: int) -> bytes:
        if envelope.strategy in PER_LIMIT_STRATEGIES or token_limit >= envelope.max_token_limit:
            return envelope.result_json or orjson.dumps(envelope.result)
        return orjson.dumps(slice_result(envelope.result, envelope.focus_tokens,
                                         envelope.related_tokens, token_limit))

    # -- misses ---------------------------------------------------------------------------------
    def _compute_once(self, ask: _Ask) -> Served:
        """Compute under the snapshot's lock; waiters read what the holder wrote."""
        lock = self.store.lock(ask.note_id, ask.strategy, ask.seed, ask.key_limit,
                               ttl_ms=self.config.lock_ttl_ms)
        try:
            acquired = lock.acquire(blocking=False)
            if not acquired:
                self.metrics.lock_waits.inc()
                acquired = lock.acquire(blocking_timeout=self.config.lock_wait_ms / 1000)
        except RedisError as err:
            self.metrics.redis_errors.inc()
            log.warning("redis lock unavailable for note %s: %s", ask.note_id, err)
            return self._live(ask, write=False)
        try:
            return self._after_lock(ask)
        finally:
            if acquired:
                self._release(lock)

    def _after_lock(self, ask: _Ask) -> Served:
        try:
            envelope = self._usable(decode_envelope(
                self.store.read(ask.note_id, ask.strategy, ask.seed, ask.key_limit)), ask)
        except CacheUnavailable:
            envelope = None
        if envelope is not None and self.store.is_fresh(envelope, self.clock_ms(), self.config_hash):
            self.metrics.hits.inc()
            return Served(self._body(envelope, ask.token_limit), "cache", 0.0)
        return self._live(ask, write=True)

    @staticmethod
    def _release(lock: Lock) -> None:
        # Expired or Redis gone: the lock frees itself at its TTL either way.
        with contextlib.suppress(LockError, RedisError):
            lock.release()

    def _live(self, ask: _Ask, *, write: bool) -> Served:
        """Compute now; with ``write``, store the snapshot-sized result through the CAS."""
        size = ask.stored_limit if write and ask.stored_limit is not None else ask.token_limit
        generation = self._generation(ask.note_id) if write else 0
        seq = self._seq() if write else None  # read before the database (DESIGN §4)
        now_ms = self.clock_ms()
        request = Request(ask.note_id, ask.seed, size, now_ms,
                          traversal_token_limit=max(size, self.config.max_token_limit))
        started = time.perf_counter()
        outcome, view = self._compute(request, ask.strategy)
        self.metrics.live_latency_s.observe(time.perf_counter() - started)
        self.metrics.live_computes.inc()
        envelope = Envelope.of(outcome, view, request, strategy=ask.strategy, generation=generation,
                               computed_at_ms=now_ms, config_hash=self.config_hash)
        if write:
            self._write_back(envelope, seq)
        return Served(self._body(envelope, ask.token_limit), "live", 0.0)

    def _seq(self) -> int | None:
        try:
            return self.store.current_seq()
        except CacheUnavailable:
            return None

    def _generation(self, note_id: int) -> int:
        try:
            return self.store.current_generation([note_id])[note_id]
        except CacheUnavailable:
            return 0

    def _compute(self, request: Request, strategy: str) -> tuple[Outcome, GraphView]:
        try:
            computed = self.service.compute_many([request], strategy)
        except DatabaseUnavailable as err:
            self.metrics.database_errors.inc()
            raise Unavailable(f"no snapshot of note {request.focus_id} and {err}") from err
        result = computed.results[request]
        if isinstance(result, GraphRagError):
            raise result
        return result, computed.view

    def _write_back(self, envelope: Envelope, seq: int | None) -> None:
        """CAS-write; then, like a rebuild, redo the focus if an edit raced the computation."""
        try:
            if not self.store.write(envelope):
                self.metrics.cas_rejections.inc()
                return
            raced = seq is None or self.store.touched_since(envelope.depends_on, seq)
            if raced and self.on_raced is not None:
                self.on_raced(envelope.note_id)
        except CacheUnavailable as err:
            self.metrics.redis_errors.inc()
            log.warning("could not write back note %s: %s", envelope.note_id, err)
