"""The reader's decision: which answer a read gets, from the snapshot or computed now.

``get`` on a fresh hit is one cache read (the snapshot and its note's generation, one MGET), one
decode and a prefix slice: no SQL, no second round trip. The paths, each an invariant of what is
served:

* **Fresh hit**: a usable snapshot (service.reader.served) whose generation is the note's and that
  is within the soft TTL under this configuration is served as ``cache``.
* **Stale**: past the soft TTL (or under another configuration) it is served as ``stale`` and one
  refresh per note is queued (a claim in Redis, ``on_stale``): a stale answer is never the only
  thing that happens.
* **Outdated**: a snapshot older than its note's generation (an event that affects it was
  processed after it was computed, and its rebuild is queued) is never served while the database
  answers: the answer is computed as on a miss. With the database down it is served as ``stale``.
* **Miss**: computed once under the snapshot's lock and written back (service.reader.live).
* **Another viewer** than the snapshot's (today's Doughnut): the snapshot's bytes only when the
  reads behind it are proven to answer this viewer the same (service.viewers), else computed live
  for this viewer and never stored.
* **Feed behind**: while change capture is behind its bound (``distrust``, service.feed) no
  snapshot is trusted: every stored ask is computed live, and only with the database down is what
  Redis holds served, as ``stale`` at best, with the reason.
* **Cache down**: compute live and say so; database down: serve any snapshot, however old; both
  down: :class:`Unavailable`.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable

from graphrag import (
    DatabaseUnavailable,
    GraphRagError,
    InvalidParameter,
    NoteNotFound,
    check_note_id,
    config_hash,
    default_strategy,
    get_strategy,
    strategy_names,
)
from graphrag.core.errors import CacheUnavailable, Unavailable
from graphrag.core.params import JAVA_INT_MAX, MAX_TOKEN_LIMIT_CEILING
from graphrag.wiki.model import Viewer
from service.answers import Ask, envelope_body, parse_ask, trace_viewer
from service.context import ContextService
from service.envelope import Envelope, is_fresh
from service.metrics import ReaderMetrics
from service.ports import Coordination, SnapshotCache
from service.reader.decoded import DecodedValues
from service.reader.live import LiveReads
from service.reader.served import ReaderConfig, Served, Source, as_served, usable
from service.reader.traces import ParsedTraces
from service.reader.viewer_reads import ViewerReads
from service.reader.write_back import WriteBack

__all__ = ["SnapshotReader"]

log = logging.getLogger("graphrag.reader")


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
        epoch: Callable[[], int] = lambda: 0, verdict_ttl_ms: int | None = 0,
        hot_store: SnapshotCache | None = None,
    ) -> None:
        self.service, self.store, self.coordination, self.config = service, store, coordination, config
        #: what :meth:`cached` reads through (the same snapshots; e.g. a connection of its own)
        self.hot_store = hot_store if hot_store is not None else store
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
        self.live = LiveReads(service, store, coordination, config, metrics=self.metrics,
                              clock_ms=clock_ms, config_hashes=self.config_hashes, fresh=self._fresh,
                              write_back=WriteBack(store, self.metrics, on_raced))
        #: the values read lately, decoded (service.reader.decoded)
        self.decoded = DecodedValues(config.decoded_values_bytes)
        #: parsed traces of snapshots read before (service.reader.traces)
        self.traces = ParsedTraces(config.parsed_traces, config.kept_answers_bytes)
        #: another viewer's reads, remembered while access holds (service.access)
        self.viewers = ViewerReads(service.store, self.live, self.metrics, epoch=epoch,
                                   clock_ms=lambda: time.monotonic_ns() // 1_000_000,
                                   ttl_ms=verdict_ttl_ms, answers=self.traces.kept_answers())

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
            served = self.live.compute(dataclasses.replace(ask, read_deleted=True), write=False)
        self._latency[served.source].observe(time.perf_counter() - started)
        return served

    def cached(
        self, note_id: int, *, token_limit: int | None = None, seed: int | None = None,
        strategy: str | None = None, viewer: Viewer | None = None, fmt: str = "json",
        doughnut: bool = False,
    ) -> Served | None:
        """:meth:`get`'s answer when it is a fresh hit in the snapshot's own view, or another
        viewer's remembered answer from it (service.reader.viewer_reads), else None (a miss, an
        outdated or stale snapshot, an answer not remembered, the feed behind, the cache down):
        one cache read, nothing computed, queued or asked of the database. Raises what ``get``
        raises for the parameters."""
        started = time.perf_counter()
        ask = self._ask(note_id, token_limit, seed, strategy, viewer, fmt, doughnut=doughnut)
        if ask.stored_limit is None or self.distrust() is not None:
            return None
        try:
            envelope, generation = self._stored(ask, self.hot_store)
        except CacheUnavailable:
            return None
        if envelope is None or envelope.generation < generation:
            return None
        now_ms = self.clock_ms()
        if not self._fresh(envelope, now_ms):
            return None
        if ask.viewer is not None and trace_viewer(envelope) != ask.viewer:
            served = self.viewers.remembered(envelope, ask, now_ms)  # (None: the route decides)
        else:
            self.metrics.hits.inc()
            served = as_served(envelope_body(envelope, ask), "cache", envelope.computed_at_ms, now_ms)
        if served is None:
            return None
        self._latency["cache"].observe(time.perf_counter() - started)
        return served

    def _ask(self, note_id: int, token_limit: int | None, seed: int | None, strategy: str | None,
             viewer: Viewer | None, fmt: str, *, doughnut: bool) -> Ask:
        c = self.config
        if strategy is not None:
            get_strategy(strategy)
        name = strategy if strategy is not None else self._default(note_id, token_limit, seed)
        doughnuts = doughnut and get_strategy(name).limits == "trace"  # today's Doughnut's paths
        ask = parse_ask(note_id, strategy=name, token_limit=token_limit, seed=seed, viewer=viewer,
                        fmt=fmt, seeds=c.seeds, max_token_limit=c.max_token_limit,
                        least_token_limit=0 if doughnuts else 1,
                        most_token_limit=JAVA_INT_MAX if doughnuts else MAX_TOKEN_LIMIT_CEILING)
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
        c, spec = self.config, get_strategy(strategy)
        if strategy not in self.strategies():
            return None
        if spec.limits == "per-limit":
            return token_limit if token_limit in c.layered_limits else None
        if spec.limits == "trace" and seed is not None and seed not in c.seeds:
            return None
        top = spec.stored_limit(c.max_token_limit)
        return top if token_limit <= top else None

    # -- paths ----------------------------------------------------------------------------------
    def _serve(self, ask: Ask) -> Served:
        reason = self.distrust() if ask.stored_limit is not None else None
        if reason is None:
            return self._snapshot(ask)
        self.metrics.distrusted.inc()
        try:
            return dataclasses.replace(self.live.compute(ask, write=False), reason=reason)
        except Unavailable:  # the database is down too: what Redis holds, as stale at best
            served = self._snapshot(ask)
            source: Source = "stale" if served.source == "cache" else served.source
            return dataclasses.replace(served, source=source, reason=reason)

    def _snapshot(self, ask: Ask) -> Served:
        if ask.stored_limit is None:
            return self.live.compute(ask, write=False)
        try:
            envelope, generation = self._stored(ask)
        except CacheUnavailable as err:
            self.metrics.redis_errors.inc()
            log.warning("cache unavailable, computing note %s live: %s", ask.note_id, err)
            return self.live.compute(ask, write=False)
        if ask.viewer is not None and (envelope is None or trace_viewer(envelope) != ask.viewer):
            return self._for_viewer(envelope, generation, ask)
        if envelope is None:
            self.metrics.misses.inc()
            return self.live.once(ask)
        if envelope.generation < generation:
            return self._outdated(envelope, ask)
        return self._cached(envelope, ask)

    def _stored(self, ask: Ask, store: SnapshotCache | None = None) -> tuple[Envelope | None, int]:
        """The stored snapshot if it can answer ``ask`` at all, and its note's generation."""
        raw, generation = (store or self.store).read_current(ask.key)
        envelope = self.decoded.decode(raw)
        if envelope is not None:
            self.traces.adopt(envelope)
        envelope = usable(envelope, ask, self.service.database())
        if envelope is not None:
            self.traces.keep(envelope)
        return envelope, generation

    def _for_viewer(self, envelope: Envelope | None, generation: int, ask: Ask) -> Served:
        """Another viewer than the snapshot's: from a current, fresh snapshot as
        service.reader.viewer_reads decides, else computed live for this viewer and never stored
        (no view is written under the owner's key)."""
        held = None if envelope is None else trace_viewer(envelope)
        now_ms = self.clock_ms()
        if (envelope is None or held is None or ask.viewer is None
                or envelope.generation < generation or not self._fresh(envelope, now_ms)):
            self.metrics.viewer_live.inc()
            return self.live.compute(ask, write=False)
        return self.viewers.serve(envelope, held, ask, now_ms)

    def _fresh(self, envelope: Envelope, now_ms: int) -> bool:
        return is_fresh(envelope, now_ms, soft_ttl_s=self.store.soft_ttl_s,
                        config_hash=self.config_hashes.get(envelope.strategy, ""))

    def _cached(self, envelope: Envelope, ask: Ask) -> Served:
        now_ms = self.clock_ms()
        if self._fresh(envelope, now_ms):
            self.metrics.hits.inc()
            return as_served(envelope_body(envelope, ask), "cache", envelope.computed_at_ms, now_ms)
        self.metrics.stale.inc()
        self._queue_refresh(ask.note_id)
        return as_served(envelope_body(envelope, ask), "stale", envelope.computed_at_ms, now_ms)

    def _outdated(self, envelope: Envelope, ask: Ask) -> Served:
        """An event that affects this snapshot came after its computation (the rebuild is queued):
        what it shows may be an edited note's old text, so the answer is computed now, once under
        the snapshot's lock, and written back. With the database down the old snapshot is served
        as stale."""
        self.metrics.outdated.inc()
        try:
            if ask.viewer is not None:
                return self.live.compute(ask, write=False)
            return self.live.once(ask)
        except Unavailable:
            self.metrics.stale.inc()
            return as_served(envelope_body(envelope, ask), "stale", envelope.computed_at_ms,
                             self.clock_ms())

    def _queue_refresh(self, note_id: int) -> None:
        if self.on_stale is None:
            return
        try:
            if self.coordination.claim_refresh(note_id, ttl_s=self.config.refresh_claim_s):
                self.on_stale(note_id)
        except GraphRagError as err:
            log.warning("could not queue a refresh of note %s: %s", note_id, err)
