"""Rebuilding snapshots: compute in batches, write through the compare-and-set (docs/redis.md).

Focus ids are taken in *epochs* of up to ``epoch_size`` (default 1,000), each computed in batches of
``batch_size`` (default 100) that share one loaded view: what a batch read (a monster parent's
children, a hub's referrers, rows and their token costs) serves the epoch's later batches without
another query. Order per epoch, which is what makes a slow rebuild harmless:

1. read the epoch's generation counters and the global edit ``seq`` (before any SQL of the epoch,
   so every row any of its batches uses was read after them, or under the same ``seq`` by an
   earlier epoch whose workspace it carries on: service.carry);
2. per batch, compute every configured (strategy, seed[, tokenLimit]) variant through
   :meth:`ContextService.compute_many` (one set of IN queries per round for the whole batch);
3. CAS-write the envelopes with the generations read in step 1; a focus found deleted or missing
   gets its snapshots and reverse-index entries removed (same CAS). A write or removal the CAS
   refuses (a counter was bumped meanwhile) is reported in ``requeue``: its focus goes back into
   the dirty set. Whoever bumped the counter may not queue it afterwards: a webhook's or change
   capture's outdating bumps without queueing, and may land after its own event was already
   taken by this very rebuild (docs/redis.md, "The compare-and-set write");
4. read the edit stamps of every note the written snapshots show, and the stamp of
   :data:`FULL_REBUILD`: a stamp newer than the ``seq`` of step 1 means an edit (or the start of a
   full rebuild, which must not be overwritten by data read before it) raced this computation: the
   focus's generation is bumped (what was just written is outdated, so the reader computes it
   instead of serving it) and the focus is reported in ``requeue``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from graphrag import (
    Costing,
    GraphRagError,
    GraphView,
    NoteNotFound,
    Outcome,
    Request,
    config_hash,
    get_strategy,
)
from graphrag.core.errors import CacheUnavailable, Forbidden
from service.carry import Carry
from service.context import ContextService
from service.envelope import Envelope, Fact, SnapshotKey, key_limit
from service.ports import SnapshotCache

__all__ = [
    "BATCH_SIZE", "EPOCH_SIZE", "FULL_REBUILD", "RebuildReport", "raced", "rebuild", "rehearse",
    "start_full_rebuild",
]

BATCH_SIZE = 100
EPOCH_SIZE = 1000
#: The fact a full rebuild stamps when its run starts. Every write checks its stamp with the stamps
#: of the notes it shows, so a computation that read ``seq`` (and the database, or a carried
#: workspace) before the run started, and writes after the run's page did, is outdated and redone
#: instead of overwriting what the run read afresh (docs/redis.md, "The edit race").
FULL_REBUILD: Fact = "rebuild:all"


def start_full_rebuild(store: SnapshotCache) -> int:
    """Mark the start of a full rebuild (nightly, ``rebuild --all``, change capture's recovery):
    a new ``seq`` ends every carried workspace (service.carry), and the stamp of
    :data:`FULL_REBUILD` makes a computation that read before it redo its focus."""
    return store.stamp_touched((FULL_REBUILD,))


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild did.

    ``count``: snapshots written (accepted by the CAS); ``errors``: focus id -> message for foci that
    could not be computed (other than not found); ``seconds``: wall time, ``write_seconds`` the
    part spent writing (the compare-and-set writes and removals, and their race check).
    ``rejected``: writes and removals the CAS refused (a newer generation exists); ``deleted``:
    foci found deleted or missing, whose snapshots were removed; ``requeue``: foci to put back into
    the dirty set, because an edit raced their computation or the CAS refused one of their writes
    or their removal.
    """

    count: int
    errors: dict[int, str]
    seconds: float
    rejected: int = 0
    deleted: frozenset[int] = frozenset()
    requeue: frozenset[int] = frozenset()
    foci: int = 0
    write_seconds: float = 0.0

    def summary(self) -> str:
        """One line: count, rate, errors (the non-interactive CLI output)."""
        rate = self.count / self.seconds if self.seconds > 0 else 0.0
        return (f"rebuilt {self.count} snapshots of {self.foci} notes in {self.seconds:.1f} s "
                f"({rate:.0f}/s); {len(self.errors)} errors, {self.rejected} superseded, "
                f"{len(self.deleted)} deleted, {len(self.requeue)} to redo")


@dataclass
class _Tally:
    count: int = 0
    rejected: int = 0
    foci: int = 0
    errors: dict[int, str] = field(default_factory=dict)
    deleted: set[int] = field(default_factory=set)
    requeue: set[int] = field(default_factory=set)
    write_seconds: float = 0.0


@dataclass(frozen=True)
class _Plan:
    strategies: tuple[str, ...]
    seeds: tuple[int, ...]
    max_token_limit: int
    layered_limits: tuple[int, ...]
    now_ms: int
    config_hashes: dict[str, str]
    database: str = ""

    def variants(self, strategy: str) -> list[tuple[int | None, int, int]]:
        """(seed, tokenLimit, traversal limit) of every snapshot of ``strategy``: prefix strategies
        one per seed at the maximum; per-limit ones one per seed and configured limit; trace ones
        the seedless order plus each seed, cut at the default tokenLimit, traced for the maximum."""
        spec, top = get_strategy(strategy), self.max_token_limit
        if spec.limits == "per-limit":
            return [(seed, lim, lim) for seed in self.seeds for lim in self.layered_limits]
        if spec.limits == "trace":
            ready, top = min(spec.default_token_limit or top, top), spec.stored_limit(top)
            return [(seed, ready, top) for seed in (None, *self.seeds)]
        return [(seed, top, top) for seed in self.seeds]

    def keys(self, focus: int) -> list[SnapshotKey]:
        """Every snapshot key this plan writes for ``focus``."""
        return [SnapshotKey(focus, s, seed, key_limit(s, limit))
                for s in self.strategies for seed, limit, _ in self.variants(s)]

    def requests(self, strategy: str, focus_ids: Sequence[int]) -> list[Request]:
        return [Request(f, seed, token_limit=lim, now_ms=self.now_ms, traversal_token_limit=top)
                for f in focus_ids for seed, lim, top in self.variants(strategy)]


def rebuild(
    service: ContextService, store: SnapshotCache, note_ids: Iterable[int], *,
    strategies: Sequence[str], seeds: Sequence[int], max_token_limit: int,
    layered_limits: Sequence[int] = (2500, 5000), now_ms: int, batch_size: int = BATCH_SIZE,
    epoch_size: int = EPOCH_SIZE, progress: Callable[[int], None] | None = None,
    carry: Carry | None = None, preload: bool = False,
) -> RebuildReport:
    """Compute and CAS-write every configured snapshot of ``note_ids`` (see the module docstring).

    ``epoch_size`` below ``batch_size`` is raised to it (an epoch holds whole batches).

    ``now_ms`` is both the recency clock of the computation and the envelopes' ``computedAt``.
    ``progress`` is called with the number of foci finished after each batch. ``carry`` hands
    loaded data from epoch to epoch while no edit is recorded (service.carry); give one that
    outlives the call to carry it on into the next call too. ``preload`` loads each epoch's own
    notes into its workspace first, over the whole epoch (after step 1, so under the same
    ``seq``): the full rebuild's pieces (service.full_rebuild). Database and Redis
    unavailability propagate (``DatabaseUnavailable``, ``CacheUnavailable``); a per-note error is
    recorded in the report and the rest of the batch carries on.
    """
    started = time.perf_counter()
    hashes = {s: config_hash(s, service.params, service.counter.name) for s in strategies}
    plan = _Plan(tuple(strategies), tuple(seeds), max_token_limit, tuple(layered_limits), now_ms,
                 hashes, service.stamp())
    tally, carry = _Tally(), carry or Carry()
    for epoch in _batches(note_ids, max(epoch_size, batch_size)):
        _rebuild_epoch(service, store, plan, epoch, batch_size, tally, progress, carry, preload)
    return RebuildReport(tally.count, tally.errors, time.perf_counter() - started, tally.rejected,
                         frozenset(tally.deleted), frozenset(tally.requeue), tally.foci,
                         tally.write_seconds)


def rehearse(
    service: ContextService, store: SnapshotCache, note_ids: Sequence[int], *,
    strategies: Sequence[str], seeds: Sequence[int], max_token_limit: int,
    layered_limits: Sequence[int] = (2500, 5000), now_ms: int,
) -> None:
    """What a rebuild of ``note_ids`` reads and computes, writing nothing: a worker process does
    it before its first task, so that the first edit does not pay for the first connections, the
    cache's scripts and the first computation's statements (compiled once per process)."""
    if not note_ids:
        return
    plan = _Plan(tuple(strategies), tuple(seeds), max_token_limit, tuple(layered_limits), now_ms,
                 {})
    store.generations(note_ids)
    store.dependents(note_ids)  # (the first pipeline loads the cache's scripts)
    for strategy in plan.strategies:
        service.compute_many(plan.requests(strategy, note_ids), strategy)


def _batches(note_ids: Iterable[int], size: int) -> Iterable[list[int]]:
    batch: list[int] = []
    for note_id in dict.fromkeys(note_ids):
        batch.append(note_id)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _rebuild_epoch(
    service: ContextService, store: SnapshotCache, plan: _Plan, epoch: list[int], batch_size: int,
    tally: _Tally, progress: Callable[[int], None] | None, carry: Carry, preload: bool = False,
) -> None:
    valid = [f for f in epoch if _valid_id(f, tally)]
    epoch_start = _Start(store.generations(valid), store.current_seq())  # before any SQL
    costing = carry.workspace(service, seq=epoch_start.seq, foci=len(valid))
    try:
        if preload:
            service.preload(costing, valid)
        for batch in _batches(valid, batch_size):
            _rebuild_batch(service, costing, store, plan, batch, epoch_start, tally)
            if progress is not None:
                progress(len(batch))
    except BaseException:
        carry.drop()
        raise
    tally.foci += len(epoch)
    if progress is not None and len(epoch) > len(valid):
        progress(len(epoch) - len(valid))


@dataclass(frozen=True)
class _Start:
    """What an epoch read before its first SQL statement (docs/redis.md)."""

    generations: dict[int, int]
    seq: int


def _rebuild_batch(
    service: ContextService, costing: Costing, store: SnapshotCache, plan: _Plan,
    batch: list[int], start: _Start, tally: _Tally,
) -> None:
    envelopes: list[Envelope] = []
    missing: set[int] = set()
    for strategy in plan.strategies:
        computed = service.compute_many(plan.requests(strategy, batch), strategy, costing)
        for request, result in computed.results.items():
            focus = request.focus_id
            if isinstance(result, NoteNotFound | Forbidden):  # no context (for its owner) any more
                missing.add(focus)
            elif isinstance(result, GraphRagError):
                tally.errors[focus] = str(result)
            else:
                envelopes.append(_envelope(result, computed.view, request, strategy,
                                           start.generations[focus], plan))
    writing = time.perf_counter()
    try:
        written, removed, refused = _store(store, plan, envelopes, missing, start.generations, tally)
        redo = raced(store, written, start.seq, removed)
        tally.write_seconds += time.perf_counter() - writing
    except CacheUnavailable:
        # the batch fails and is redone; until then nothing it may have written is served
        _outdate_unanswered(store, {env.note_id for env in envelopes} | missing)
        raise
    if redo:  # what they just wrote may show an edited note's old text: outdated until redone
        store.bump_generations(redo)
    tally.requeue |= redo | refused


def _valid_id(note_id: int, tally: _Tally) -> bool:
    if isinstance(note_id, int) and not isinstance(note_id, bool) and note_id >= 0:
        return True
    tally.errors[note_id] = "noteId: must be a non-negative integer"
    return False


def _envelope(outcome: Outcome, view: GraphView, request: Request, strategy: str, generation: int,
              plan: _Plan) -> Envelope:
    return Envelope.of(outcome, view, request, strategy=strategy, generation=generation,
                       computed_at_ms=plan.now_ms, config_hash=plan.config_hashes[strategy],
                       database=plan.database)


def _store(store: SnapshotCache, plan: _Plan, envelopes: list[Envelope], missing: set[int],
           generations: dict[int, int], tally: _Tally,
           ) -> tuple[list[Envelope], set[int], set[int]]:
    """Write and remove under compare-and-set; returns (the envelopes written, the foci removed,
    the foci with a write or removal refused). What was refused needs no race check, since it
    wrote nothing: its stored snapshots are already outdated by whoever moved the generation. But
    it needs a redo, which that bump alone does not promise (module docstring, step 3)."""
    accepted = store.write_many(envelopes)
    written = [env for env, ok in zip(envelopes, accepted, strict=True) if ok]
    refused = {env.note_id for env, ok in zip(envelopes, accepted, strict=True) if not ok}
    removed = {f for f in sorted(missing)
               if store.delete_focus(f, plan.keys(f), generation=generations[f])}
    refused |= missing - removed
    tally.count += len(written)
    tally.rejected += len(envelopes) - len(written) + len(missing) - len(removed)
    tally.deleted |= removed
    return written, removed, refused


def _outdate_unanswered(store: SnapshotCache, foci: set[int]) -> None:
    """Outdate what a batch may have written when Redis stopped answering before its race check
    (a write applied whose reply was lost), as far as Redis still takes it."""
    with contextlib.suppress(CacheUnavailable):
        store.bump_generations(foci)


def raced(store: SnapshotCache, envelopes: list[Envelope], seq: int,
          removed: set[int] | None = None) -> set[int]:
    """Foci whose snapshot shows a note edited after ``seq`` was read; or, when a full rebuild
    started since, every focus written or found ``removed`` (a deletion read before the run must
    not outlive the run's page either; docs/redis.md, "The edit race")."""
    removed = removed or set()
    if not envelopes and not removed:
        return set()
    shown = {x for env in envelopes for x in env.depends_on}
    touched = store.touched_since([*shown, FULL_REBUILD], seq)
    if FULL_REBUILD in touched:
        return {env.note_id for env in envelopes} | removed
    return {env.note_id for env in envelopes if touched.intersection(env.depends_on)}
