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
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from graphrag import (
    DatabaseUnavailable,
    GraphRagError,
    InvalidParameter,
    NoteNotFound,
    Request,
    check_note_id,
    config_hash,
    default_strategy,
    get_strategy,
    strategy_names,
)
from graphrag.core.errors import CacheUnavailable, Unavailable
from graphrag.wiki.model import Viewer
from service.answers import (
    Answer,
    Ask,
    envelope_body,
    outcome_body,
    parse_ask,
    ready,
    trace_viewer,
)
from service.context import ContextService
from service.envelope import Envelope, decode_envelope, is_fresh
from service.metrics import ReaderMetrics
from service.ports import Coordination, Lease, SnapshotCache
from service.rebuild import raced
from service.viewers import same_view

__all__ = ["ReaderConfig", "Served", "SnapshotReader", "Unavailable"]

log = logging.getLogger("graphrag.reader")
Source = Literal["cache", "stale", "live"]


@dataclass(frozen=True, slots=True)
class ReaderConfig:
    """What snapshots exist: strategies, seeds, the maximum tokenLimit and layered's limits.
    ``strategies`` None: the registry's default strategy of the source's graph model."""

    strategies: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None
    seeds: tuple[int, ...] = (0,)
    max_token_limit: int = 5000
    layered_limits: tuple[int, ...] = (2500, 5000)
    lock_ttl_ms: int = 10_000
    lock_wait_ms: int = 3_000
    refresh_claim_s: int = 300


@dataclass(frozen=True, slots=True)
class Served:
    """An answer and where it came from; ``age_s`` = seconds since it was computed. ``body`` is the
    result JSON, or for a markdown read ``{"markdown": ...}`` with the text itself in ``text``.
    ``reason``: why no snapshot was trusted for it, when the change feed is behind."""

    body: bytes
    source: Source
    age_s: float
    text: str | None = None
    #: why the snapshots were not trusted for this read (the change feed is behind: service.feed)
    reason: str | None = None
    #: when the answer was computed (ms since the epoch): the snapshot's time, or the read's if live
    computed_at_ms: int = 0


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class SnapshotReader:
    """Serves results; see the module docstring for the paths."""

    def __init__(
        self, service: ContextService, store: SnapshotCache, coordination: Coordination,
        config: ReaderConfig, *, metrics: ReaderMetrics | None = None,
        on_stale: Callable[[int], None] | None = None, on_raced: Callable[[int], object] | None = None,
        clock_ms: Callable[[], int] = _wall_ms, rng: random.Random | None = None,
        distrust: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.service, self.store, self.coordination, self.config = service, store, coordination, config
        self._strategies = config.strategies if config.strategies is not None else (
            lambda: (default_strategy(service.store.model),))
        self.metrics = metrics or ReaderMetrics.create()
        self.on_stale, self.on_raced, self.clock_ms = on_stale, on_raced, clock_ms
        self.distrust = distrust  # why snapshots may not be served now (service.feed), no I/O
        self.rng = rng or random.Random()
        self.config_hashes = {s: config_hash(s, service.params, service.counter.name)
                              for s in strategy_names()}
        self._latency = {source: self.metrics.read_latency_s.labels(source)
                         for source in ("cache", "stale", "live")}

    def strategies(self) -> tuple[str, ...]:
        """The strategies kept as snapshots, the first being the default. A callable in the
        config is resolved at the first read that can resolve it (which strategies exist may
        depend on the database's layout, which a reader started while the database was down
        learns later; until then a read without an explicit strategy is Unavailable)."""
        if not isinstance(self._strategies, tuple):
            try:
                self._strategies = tuple(self._strategies())
            except DatabaseUnavailable as err:
                raise Unavailable(f"cannot tell which snapshots exist yet: {err}") from err
        return self._strategies

    # -- the public call ------------------------------------------------------------------------
    def get(
        self, note_id: int, *, token_limit: int | None = None, seed: int | None = None,
        strategy: str | None = None, viewer: Viewer | None = None, fmt: str = "json",
        doughnut: bool = False,
    ) -> Served:
        """The answer for ``note_id``; raises InvalidParameter, NoteNotFound, NoteNotReadable,
        Unavailable. ``viewer`` (wiki strategies) reads as that user; ``fmt`` json or markdown.
        ``doughnut``: Doughnut's own paths, which take tokenLimit 0 and answer a deleted note like
        a live one (computed live, never stored; service.doughnut_api)."""
        started = time.perf_counter()
        ask = self._ask(note_id, token_limit, seed, strategy, viewer, fmt, doughnut=doughnut)
        try:
            served = self._serve(ask)
        except NoteNotFound:
            if not (doughnut and ask.traced):
                raise
            served = self._live(dataclasses.replace(ask, read_deleted=True), write=False)
        self._latency[served.source].observe(time.perf_counter() - started)
        return served

    def _ask(self, note_id: int, token_limit: int | None, seed: int | None, strategy: str | None,
             viewer: Viewer | None, fmt: str, *, doughnut: bool) -> Ask:
        c = self.config
        if strategy is not None:
            get_strategy(strategy)
        name = strategy if strategy is not None else self._default(note_id, token_limit, seed)
        least = 0 if doughnut and get_strategy(name).limits == "trace" else 1  # today's Doughnut
        ask = parse_ask(note_id, strategy=name, token_limit=token_limit, seed=seed, viewer=viewer,
                        fmt=fmt, seeds=c.seeds, max_token_limit=c.max_token_limit,
                        least_token_limit=least)
        seed = ask.seed
        if seed is None and not ask.traced:
            seed = self.rng.choice(c.seeds)
        stored = self._stored_limit(ask.strategy, ask.token_limit, seed)
        return Ask(ask.note_id, ask.strategy, seed, ask.token_limit, ask.viewer, ask.fmt, stored)

    def _default(self, note_id: int, token_limit: int | None, seed: int | None) -> str:
        """The default strategy; the other parameters are checked first (a bad one is a 400 even
        while the default cannot be learned)."""
        check_note_id(note_id)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise InvalidParameter("seed", "must be an integer")
        return self.strategies()[0]

    def _stored_limit(self, strategy: str, token_limit: int, seed: int | None) -> int | None:
        c, mode = self.config, get_strategy(strategy).limits
        if strategy not in self.strategies():
            return None
        if mode == "per-limit":
            return token_limit if token_limit in c.layered_limits else None
        if mode == "trace" and seed is not None and seed not in c.seeds:
            return None
        return c.max_token_limit if token_limit <= c.max_token_limit else None

    # -- paths ----------------------------------------------------------------------------------
    def _serve(self, ask: Ask) -> Served:
        reason = self.distrust() if ask.stored_limit is not None else None
        if reason is None:
            return self._snapshot(ask)
        self.metrics.distrusted.inc()
        try:
            return dataclasses.replace(self._live(ask, write=False), reason=reason)
        except Unavailable:  # the database is down too: what Redis holds, as stale at best
            served = self._snapshot(ask)
            source: Source = "stale" if served.source == "cache" else served.source
            return dataclasses.replace(served, source=source, reason=reason)

    def _snapshot(self, ask: Ask) -> Served:
        if ask.stored_limit is None:
            return self._live(ask, write=False)
        try:
            raw, generation = self.store.read_current(ask.key)
        except CacheUnavailable as err:
            self.metrics.redis_errors.inc()
            log.warning("cache unavailable, computing note %s live: %s", ask.note_id, err)
            return self._live(ask, write=False)
        envelope = self._usable(decode_envelope(raw), ask)
        if ask.viewer is not None and (envelope is None or trace_viewer(envelope) != ask.viewer):
            return self._for_viewer(envelope, generation, ask)
        if envelope is None:
            self.metrics.misses.inc()
            return self._compute_once(ask)
        if envelope.generation < generation:
            return self._outdated(envelope, ask)
        return self._cached(envelope, ask)

    def _for_viewer(self, envelope: Envelope | None, generation: int, ask: Ask) -> Served:
        """Another viewer than the snapshot's: the snapshot's bytes when the viewer-dependent reads
        behind it are proven to answer this viewer the same (service.viewers), else computed live
        for this viewer and never stored (no view is written under the owner's key)."""
        held = None if envelope is None else trace_viewer(envelope)
        now_ms = self.clock_ms()
        if (envelope is not None and held is not None and ask.viewer is not None
                and envelope.generation >= generation and self._fresh(envelope, now_ms)
                and same_view(self.service.store, envelope.depends_on, held, ask.viewer)):
            self.metrics.viewer_proven.inc()
            return self._served(envelope_body(envelope, ask), "cache", envelope.computed_at_ms, now_ms)
        self.metrics.viewer_live.inc()
        return self._live(ask, write=False)

    def _usable(self, envelope: Envelope | None, ask: Ask) -> Envelope | None:
        """The envelope if it can answer this ask at all (fresh or stale); None is a miss."""
        if envelope is None or envelope.note_id != ask.note_id or envelope.seed != ask.seed:
            return None
        if envelope.strategy != ask.strategy or envelope.max_token_limit < ask.token_limit:
            return None
        if ask.traced:
            usable = ready(envelope, ask) or envelope.trace is not None
            return envelope if envelope.traced and usable else None
        if ask.token_limit < envelope.max_token_limit and not envelope.sliceable:
            return None
        return envelope

    def _fresh(self, envelope: Envelope, now_ms: int) -> bool:
        return is_fresh(envelope, now_ms, soft_ttl_s=self.store.soft_ttl_s,
                        config_hash=self.config_hashes.get(envelope.strategy, ""))

    def _cached(self, envelope: Envelope, ask: Ask) -> Served:
        now_ms = self.clock_ms()
        if self._fresh(envelope, now_ms):
            self.metrics.hits.inc()
            return self._served(envelope_body(envelope, ask), "cache", envelope.computed_at_ms, now_ms)
        self.metrics.stale.inc()
        self._queue_refresh(ask.note_id)
        return self._served(envelope_body(envelope, ask), "stale", envelope.computed_at_ms, now_ms)

    def _outdated(self, envelope: Envelope, ask: Ask) -> Served:
        """An event that affects this snapshot came after its computation (the rebuild is queued):
        what it shows may be an edited note's old text, so the answer is computed now, once under
        the snapshot's lock, and written back. With the database down the old snapshot is served
        as stale."""
        self.metrics.outdated.inc()
        try:
            if ask.viewer is not None:
                return self._live(ask, write=False)
            return self._compute_once(ask)
        except Unavailable:
            self.metrics.stale.inc()
            return self._served(envelope_body(envelope, ask), "stale", envelope.computed_at_ms,
                                self.clock_ms())

    @staticmethod
    def _served(answer: Answer, source: Source, at_ms: int, now_ms: int) -> Served:
        """``at_ms``: when the answer was computed (the snapshot's time, or the live request's)."""
        return Served(answer.body, source, max(0.0, (now_ms - at_ms) / 1000), answer.text,
                      computed_at_ms=at_ms)

    def _queue_refresh(self, note_id: int) -> None:
        if self.on_stale is None:
            return
        try:
            if self.coordination.claim_refresh(note_id, ttl_s=self.config.refresh_claim_s):
                self.on_stale(note_id)
        except GraphRagError as err:
            log.warning("could not queue a refresh of note %s: %s", note_id, err)

    # -- misses ---------------------------------------------------------------------------------
    def _compute_once(self, ask: Ask) -> Served:
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
            return self._live(ask, write=False)
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
        envelope = self._usable(decode_envelope(raw), ask)
        if (envelope is not None and envelope.generation >= generation
                and self._fresh(envelope, self.clock_ms())):
            self.metrics.hits.inc()
            at_ms = envelope.computed_at_ms  # another reader's write-back: age 0 as before
            return self._served(envelope_body(envelope, ask), "cache", at_ms, at_ms)
        return self._live(ask, write=True)

    def _request(self, ask: Ask, now_ms: int, *, write: bool) -> Request:
        """What to compute: the snapshot's shape when writing it back, else just the ask (a trace
        strategy's traversal is then sized for the asked tokenLimit only)."""
        top = self.config.max_token_limit
        if write and ask.traced:
            ready = min(get_strategy(ask.strategy).default_token_limit or top, top)
            return Request(ask.note_id, ask.seed, ready, now_ms, traversal_token_limit=top)
        size = ask.stored_limit if write and ask.stored_limit is not None else ask.token_limit
        traversal = size if ask.traced else max(size, top)
        return Request(ask.note_id, ask.seed, size, now_ms, traversal_token_limit=traversal,
                       viewer=ask.viewer, read_deleted=ask.read_deleted)

    def _live(self, ask: Ask, *, write: bool) -> Served:
        """Compute now; with ``write``, store the snapshot-sized result through the CAS."""
        generation = self._generation(ask.note_id) if write else 0
        seq = self._seq() if write else None  # read before the database (docs/redis.md)
        request = self._request(ask, self.clock_ms(), write=write)
        started = time.perf_counter()
        outcome, view = self._compute(request, ask.strategy)
        self.metrics.live_latency_s.observe(time.perf_counter() - started)
        self.metrics.live_computes.inc()
        if not write:
            return self._served(outcome_body(outcome, ask), "live", request.now_ms, request.now_ms)
        envelope = Envelope.of(outcome, view, request, strategy=ask.strategy, generation=generation,
                               computed_at_ms=request.now_ms,
                               config_hash=self.config_hashes[ask.strategy])
        self._write_back(envelope, seq)
        return self._served(envelope_body(envelope, ask), "live", request.now_ms, request.now_ms)

    def _seq(self) -> int | None:
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

    def _write_back(self, envelope: Envelope, seq: int | None) -> None:
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
