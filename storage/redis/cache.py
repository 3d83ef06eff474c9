"""Snapshots in Redis: the compare-and-set write, generations, the reverse index and edit stamps.

The Redis implementation of :class:`service.ports.SnapshotCache` (docs/redis.md). Keys come from
:mod:`storage.redis.keys`. A snapshot is the orjson bytes of a :class:`service.envelope.Envelope`,
stored with a PX expiry equal to the hard TTL; the reader counts it *fresh* for the soft TTL.

Generations
    ``gen:{F}`` is a hybrid logical clock, bumped by a Lua script to ``max(previous + 1, Redis TIME in
    microseconds)`` (about 1.8e15: exact in Lua's doubles until 2255). It carries a TTL (the index
    TTL, >= the hard TTL, refreshed by every bump and every accepted write) like every cache key, and
    losing it (expiry, ``volatile-lru`` eviction) is harmless: a missing counter reads as 0, and the
    next bump starts from the server clock, i.e. above every generation handed out before (barring
    a server clock stepping back, or a burst of more bumps than microseconds right before the loss).
    A plain INCR would restart at 1 and let an in-flight, older rebuild overwrite a newer snapshot.
    The global ``seq`` counter is the same clock and the one key without a TTL: touched stamps are
    compared against it, so it must never move backwards (a reset would requeue every focus showing
    a stamped note, on every rebuild, until the stamps expire a day later). Should it be lost anyway
    (a Redis Cluster primary restarted empty while the stamps live on other primaries), the next
    number starts from the server clock, above every stamp handed out before.

Write = compare-and-set + reverse index, one round trip (two on a cluster)
    A snapshot of focus F shows notes X1..Xn (``dependsOn``). ``dep:{X}`` (X's slot) must contain F
    while any snapshot of F shows X. The CAS touches only F's slot (snapshot, ``gen:{F}`` and
    ``shows:{F}``, a hash snapshot key -> ids it shows), so it is one Lua script that is legal in
    Redis Cluster; the ``dep:{X}`` keys live in other slots and are updated by plain commands in the
    *same pipeline* (one round trip, no MULTI):

    1. ``SADD dep:{X} F`` and its TTL for every shown X (before the script: the index may
       over-approximate, never under-approximate, so a reader of ``dep:{X}`` never misses F while
       the snapshot shows X);
    2. the CAS script: if ``generation >= gen:{F}`` (missing = 0) it SETs the snapshot (PX hard TTL)
       and records its ids in ``shows:{F}``; it drops ``shows`` fields whose snapshot has expired or
       vanished (it EXISTS-checks those keys by name: undeclared, but in F's slot, so still
       cluster-legal); either way it returns the *stale* ids: those that were in ``shows:{F}`` before or
       that step 1 just added, but that no live snapshot of F shows now (after a refusal: what step 1
       added in vain);
    3. step 1 again, for every shown X.

    A batch of envelopes is one pipeline: every step 1, then every script, then every step 3, with
    the index commands merged per shown note (``SADD dep:{X} F1 F2 ...``: a batch of neighbouring
    foci shows many of the same notes). Steps 1 and 3 are the same script calls: on a single Redis
    one per 500 shown notes (``INDEX_MANY_LUA``: its keys span slots, which only a cluster refuses),
    so a batch of 100 foci showing ~1,000 notes is about 105 commands instead of ~2,100; on a
    cluster one per shown note, each on its own slot.

    Only when some id went stale (a dependency was dropped, or the CAS refused) do more round trips
    follow: ``SREM dep:{X} F`` for the stale ids, then a re-read of ``shows:{F}``, then ``SADD`` back for
    any stale X that a concurrent writer of F has meanwhile made shown again. Why this closes the race
    between writer A dropping X and writer B (another variant of F) adding X: if B's step 3 runs after
    A's SREM, B restores the member; otherwise B's script ran before B's step 3, hence before A's
    SREM and A's re-read, so A's re-read sees X and puts F back. What remains: between A's SREM and its
    re-add (two round trips, only in that interleaving) ``dep:{X}`` lacks F while B's snapshot shows
    X; an event on X that resolves ``dep:{X}`` in exactly that window, after B's own ``touched``
    check, misses F, and F shows X's old text until the soft TTL or the nightly rebuild. The
    ordering argument relies on one connection's commands running in order, which holds for a single
    Redis. A cluster pipeline keeps order only per node (``dep:{X}`` and F's keys live on different
    ones), so on a cluster steps 1-2 are one round trip and step 3 a second, sent once every script
    has answered: "B's script ran before B's step 3" holds again. Step 1 may then land after its
    script on another node; an event on X resolving ``dep:{X}`` in that moment stamped X before
    (service.events), hence before the writer's ``touched`` check, which follows both round trips:
    F is redone if it read X before that edit ("The edit race" in docs/redis.md).

TTLs
    Snapshot: hard TTL. ``dep:{X}``, ``shows:{F}``, ``gen:{F}``: index TTL = hard TTL + 60 s,
    refreshed on write, so the index outlives every snapshot it describes. ``touched:{X}``:
    ``touched_ttl_s`` (must exceed the longest rebuild). Eviction under memory pressure can still drop
    a ``dep`` key early; the nightly rebuild and the soft TTL bound the staleness that causes.

Every redis-py connection or timeout error (and read-only/out-of-memory replies) leaves as
:class:`~graphrag.core.errors.CacheUnavailable`. The client must use ``decode_responses=False``.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from redis.exceptions import NoScriptError, ResponseError

from service.envelope import Envelope, SnapshotKey
from storage.redis.client import (
    UNAVAILABLE,
    Pinned,
    evalsha,
    is_cluster,
    mget,
    translated,
    unavailable,
)
from storage.redis.keys import DEFAULT_PREFIX, Keys
from storage.redis.scripts import BUMP_LUA, DELETE_LUA, INDEX_LUA, INDEX_MANY_LUA, STAMP_LUA, WRITE_LUA
from storage.redis.stored import foci_showing, id_list, stored_counter, stored_fact, stored_facts

__all__ = ["INDEX_TTL_MARGIN_S", "RedisCache"]

#: Keys per MGET of edit stamps (a single Redis; on a cluster these would go per slot).
_MGET_CHUNK = 500
#: Foci per index-script call (Lua's unpack() takes a few thousand values at most).
_INDEX_CHUNK = 1000
#: ``dep:`` keys per index script on a single Redis (one command instead of one per shown note).
_INDEX_KEYS = 500
#: One script call: (sha, keys, args).
_Call = tuple[str, list[str], list[Any]]
#: How much longer than a snapshot the reverse index and generation counters live.
INDEX_TTL_MARGIN_S = 60


class RedisCache:
    """Snapshot reads and CAS writes, generations, the reverse index and edit stamps (one Redis)."""

    def __init__(
        self, redis_client: Any, *, prefix: str = DEFAULT_PREFIX, soft_ttl_s: int = 86_400,
        hard_ttl_s: int = 7 * 86_400, touched_ttl_s: int = 86_400,
    ) -> None:
        if not 0 < soft_ttl_s <= hard_ttl_s:
            raise ValueError("TTLs must satisfy 0 < soft_ttl_s <= hard_ttl_s")
        if touched_ttl_s <= 0:
            raise ValueError("touched_ttl_s must be positive")
        self.redis, self.keys = redis_client, Keys(prefix)
        self.soft_ttl_s, self.hard_ttl_s, self.touched_ttl_s = soft_ttl_s, hard_ttl_s, touched_ttl_s
        self.index_ttl_ms = (hard_ttl_s + INDEX_TTL_MARGIN_S) * 1000
        self._write = redis_client.register_script(WRITE_LUA)
        self._delete = redis_client.register_script(DELETE_LUA)
        self._bump = redis_client.register_script(BUMP_LUA)
        self._stamp = redis_client.register_script(STAMP_LUA)
        self._index = redis_client.register_script(INDEX_LUA)
        self._index_many = redis_client.register_script(INDEX_MANY_LUA)
        self._cluster = is_cluster(redis_client)
        self._scripts_loaded = False
        self._pinned: Pinned | None = None  # read_current through a held connection (pinned())

    def _snapshot_key(self, key: SnapshotKey) -> str:
        return self.keys.snapshot(key.note_id, key.strategy, key.seed, key.token_limit)

    # -- reads ----------------------------------------------------------------------------------
    def read(self, key: SnapshotKey) -> bytes | None:
        """The stored bytes (one GET), or None. A key of another type reads as a miss. The reader
        uses :meth:`read_current`, which also says whether an event came after the snapshot."""
        name = self._snapshot_key(key)
        try:  # the hot path: a plain try rather than the translated() context manager
            value = self.redis.get(name)
        except UNAVAILABLE as err:  # before ResponseError: read-only/OOM replies are ones too
            raise unavailable(err) from err
        except ResponseError as err:
            if "WRONGTYPE" in str(err):
                return None
            raise
        return value.encode() if isinstance(value, str) else value

    def pinned(self) -> RedisCache:
        """This cache with its :meth:`read_current` through one connection of its own, held
        (storage.redis.client.Pinned): for the thread that answers the hits, the HTTP server's
        event loop, which reads one at a time. On a cluster, this cache itself."""
        if self._cluster:
            return self
        pinned = copy.copy(self)
        pinned._pinned = Pinned(self.redis)
        return pinned

    def read_current(self, key: SnapshotKey) -> tuple[bytes | None, int]:
        """(the stored bytes or None, the note's generation) in one MGET: both keys carry the
        note's hash tag, so they share a slot on a cluster. A key of another type reads as None
        (MGET answers nil for it), a generation that is not a number as 0."""
        names = (self._snapshot_key(key), self.keys.generation(key.note_id))
        try:
            client = self.redis if self._pinned is None else self._pinned.client()
            value, generation = client.mget(names)
        except UNAVAILABLE as err:
            raise unavailable(err) from err
        return (value.encode() if isinstance(value, str) else value), stored_counter(generation)

    def ping(self) -> None:
        """Raise :class:`CacheUnavailable` unless Redis answers PING."""
        with translated():
            self.redis.ping()

    def sample(self, count: int, rng: random.Random) -> list[bytes]:
        """Up to ``count`` stored snapshots drawn uniformly (reservoir sampling over SCAN)."""
        chosen: list[bytes] = []
        with translated():
            for seen, key in enumerate(self.redis.scan_iter(match=f"{self.keys.prefix}:snap:*",
                                                            count=1000)):
                if len(chosen) < count:
                    chosen.append(key)
                elif (slot := rng.randrange(seen + 1)) < count:
                    chosen[slot] = key
            values = mget(self.redis, chosen)
        return [v for v in values if isinstance(v, bytes)]

    def dependents(self, note_ids: Iterable[int | str]) -> set[int]:
        """The foci whose snapshots (any variant) show any of ``note_ids`` or read any of these
        facts, or whose viewer's view a reader keeps that read one (one pipelined trip)."""
        ids = list(dict.fromkeys(note_ids))
        replies = self._execute(lambda p: [(p.smembers(self.keys.dep(i)),
                                             p.smembers(self.keys.view_dep(i))) for i in ids])
        return {int(f) for r in replies for f in r}

    def watch_view(self, focus: int, facts: Iterable[int | str], *, ttl_ms: int) -> None:
        """Add ``focus`` to each fact's ``vdep`` for ``ttl_ms`` (one pipelined trip)."""
        keys = [self.keys.view_dep(x) for x in dict.fromkeys(facts)]
        self._execute(lambda p: [(p.sadd(k, focus), p.pexpire(k, ttl_ms)) for k in keys])

    def shown_by(self, focus_ids: Iterable[int]) -> dict[int, set[Any]]:
        """Per focus: the union of the ids its snapshots show (from ``shows:{F}``, pipelined)."""
        ids = list(dict.fromkeys(focus_ids))
        replies = self._execute(lambda p: [p.hvals(self.keys.shows(f)) for f in ids])
        return {f: {stored_fact(x) for v in vals for x in v.split()}
                for f, vals in zip(ids, replies, strict=True)}

    # -- generations and edit stamps ------------------------------------------------------------
    def generations(self, note_ids: Iterable[int]) -> dict[int, int]:
        """Each note's generation counter (missing = 0), pipelined GETs."""
        ids = list(dict.fromkeys(note_ids))
        replies = self._execute(lambda p: [p.get(self.keys.generation(i)) for i in ids])
        return {i: int(v or 0) for i, v in zip(ids, replies, strict=True)}

    def bump_generations(self, note_ids: Iterable[int]) -> dict[int, int]:
        """Advance each note's generation (strictly increasing even across key loss); pipelined."""
        ids = list(dict.fromkeys(note_ids))
        replies = self._execute(lambda p: [
            evalsha(p, self._bump.sha, [self.keys.generation(i)], self.index_ttl_ms) for i in ids
        ])
        return {i: int(v) for i, v in zip(ids, replies, strict=True)}

    def current_seq(self) -> int:
        """The global edit sequence. A rebuild reads it before reading the database. A missing
        counter (lost with a cluster primary, say) takes the next number, from the server clock: read
        as 0, every stamp (the full rebuild's included) would look newer than every computation."""
        with translated():
            raw = self.redis.get(self.keys.seq())
            return int(raw) if raw is not None else int(self._bump(keys=[self.keys.seq()], args=[0]))

    def stamp_touched(self, note_ids: Iterable[int | str]) -> int:
        """Take the next sequence number and stamp it on every edited note (never lowering a stamp)."""
        ids = list(dict.fromkeys(note_ids))
        with translated():
            seq = int(self._bump(keys=[self.keys.seq()], args=[0]))  # no expiry
        ttl_ms = self.touched_ttl_s * 1000
        self._execute(lambda p: [
            evalsha(p, self._stamp.sha, [self.keys.touched(i)], seq, ttl_ms) for i in ids
        ])
        return seq

    def touched_since(self, note_ids: Iterable[int | str], seq: int) -> set[Any]:
        """The notes whose latest edit stamp is newer than ``seq``."""
        ids = list(dict.fromkeys(note_ids))
        with translated():
            stamps = mget(self.redis, [self.keys.touched(i) for i in ids], chunk=_MGET_CHUNK)
        return {i for i, v in zip(ids, stamps, strict=True) if int(v or 0) > seq}

    # -- writes ---------------------------------------------------------------------------------
    def write_many(self, envelopes: Sequence[Envelope]) -> list[bool]:
        """CAS-write many snapshots in one round trip, two on a cluster (module docstring); accepted
        flags."""
        if not envelopes:
            return []
        index = self._index_calls(foci_showing(envelopes))
        replies = self._write_round_trips(envelopes, index)
        scripts = replies[len(index) : len(index) + len(envelopes)]  # after step 1
        accepted: list[bool] = []
        stale: dict[int, set[Any]] = {}
        for env, reply in zip(envelopes, scripts, strict=True):
            accepted.append(int(reply[0]) == 1)
            stale.setdefault(env.note_id, set()).update(stored_facts(reply[2:]))
        self._unindex(stale)
        return accepted

    def delete_focus(self, note_id: int, keys: Iterable[SnapshotKey] = (), *,
                     generation: int | None = None) -> bool:
        """Remove every snapshot of a (deleted) focus and its reverse-index entries.

        Removes the snapshots recorded in ``shows:{F}`` plus ``keys``. With ``generation`` it is a
        compare-and-set like a write (refused, returning False, when the note has since moved on,
        e.g. been restored and rebuilt); without it, unconditional.
        """
        names = [self._snapshot_key(k) for k in keys if k.note_id == note_id]
        script_keys = [self.keys.generation(note_id), self.keys.shows(note_id), *names]
        arg = -1 if generation is None else generation
        sha = self._delete.sha
        reply = self._execute(
            lambda p: evalsha(p, sha, script_keys, arg, self.keys.changed(note_id)))[0]
        if int(reply[0]) != 1:
            return False
        self._unindex({note_id: stored_facts(reply[2:])})
        return True

    # -- internals ------------------------------------------------------------------------------
    def _write_round_trips(self, envelopes: Sequence[Envelope], index: Sequence[_Call]) -> list[Any]:
        """Steps 1-3 (module docstring); the replies of steps 1-2. One connection keeps order, so on
        one Redis step 3 follows in the same round trip; a cluster keeps it per node only, so there
        step 3 is sent once the scripts answered."""
        if not self._cluster:
            return self._execute(lambda pipe: self._queue_writes(pipe, envelopes, index, index))
        replies = self._execute(lambda pipe: self._queue_writes(pipe, envelopes, index))
        self._execute(lambda pipe: self._queue(pipe, index))
        return replies

    def _queue_writes(self, pipe: Any, envelopes: Sequence[Envelope],
                      index: Sequence[_Call], then: Sequence[_Call] = ()) -> None:
        """Step 1 (``index``) for every envelope, then every CAS script, then ``then`` (step 3 in
        the same round trip). Every script runs after its step 1 and before its step 3, which is
        all the ordering argument needs."""
        self._queue(pipe, index)
        for env in envelopes:
            focus = env.note_id
            key = self._snapshot_key(env.key)
            evalsha(pipe, self._write.sha, [key, self.keys.generation(focus), self.keys.shows(focus)],
                    env.encode(), env.generation, self.hard_ttl_s * 1000, self.index_ttl_ms,
                    id_list(env.depends_on), self.keys.changed(focus))
        self._queue(pipe, then)

    def _index_calls(self, foci_by_shown: Mapping[Any, Collection[int]]) -> list[_Call]:
        """The script calls that ``SADD`` the foci to each ``dep:{X}`` and refresh its TTL, merged
        per shown note: per key on a cluster (each on its own slot), one script per 500 keys on a
        single Redis (``INDEX_MANY_LUA``: keys spanning slots, which only a cluster refuses)."""
        items = list(foci_by_shown.items())
        if not self._cluster:
            parts = [items[at : at + _INDEX_KEYS] for at in range(0, len(items), _INDEX_KEYS)]
            return [(self._index_many.sha, [self.keys.dep(x) for x, _ in part],
                     [self.index_ttl_ms, *(id_list(foci) for _, foci in part)]) for part in parts]
        calls: list[_Call] = []
        for x, foci in items:
            members = list(foci)
            calls += [(self._index.sha, [self.keys.dep(x)],
                       [self.index_ttl_ms, *members[at : at + _INDEX_CHUNK]])
                      for at in range(0, len(members), _INDEX_CHUNK)]
        return calls

    @staticmethod
    def _queue(pipe: Any, calls: Sequence[_Call]) -> None:
        for sha, keys, args in calls:
            evalsha(pipe, sha, keys, *args)

    def _unindex(self, stale: Mapping[int, Collection[Any]]) -> None:
        """SREM stale (focus, id) pairs, then put back any that a concurrent write made shown again."""
        pairs = [(f, x) for f, xs in stale.items() for x in sorted(xs, key=str)]
        if not pairs:
            return
        self._execute(lambda p: [p.srem(self.keys.dep(x), f) for f, x in pairs])
        shown = self.shown_by(f for f, _ in pairs)
        back = [(f, x) for f, x in pairs if x in shown[f]]
        if back:
            foci_by_shown: dict[Any, set[int]] = {}
            for f, x in back:
                foci_by_shown.setdefault(x, set()).add(f)
            self._execute(lambda p: self._queue(p, self._index_calls(foci_by_shown)))

    def _execute(self, queue: Callable[[Any], Any]) -> list[Any]:
        """Run a non-transactional pipeline built by ``queue``; load scripts and rerun on NOSCRIPT.

        The scripts are loaded before this instance's first pipeline, so a pipeline never meets
        some of them cached and others not (a server that older workers fed): its CAS scripts would
        run in the first attempt and answer differently in the rerun. A NOSCRIPT after that means
        the server lost its scripts (a restart, a failover), so none of the first attempt's
        scripts ran, and rerunning is safe: every other queued command is idempotent. (Should an
        older worker have loaded some of them again in between, a dependency dropped in the first
        attempt may stay in ``dep:``: an over-approximation, one spurious rebuild.)
        """
        with translated():
            if not self._scripts_loaded:
                self._load_scripts()
            for attempt in range(2):
                pipe = self.redis.pipeline(transaction=False)
                queue(pipe)
                replies: list[Any] = pipe.execute(raise_on_error=False)
                if attempt == 0 and any(isinstance(r, NoScriptError) for r in replies):
                    self._load_scripts()
                    continue
                break
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            return replies

    def _load_scripts(self) -> None:
        for script in (self._write, self._delete, self._bump, self._stamp, self._index,
                       self._index_many):
            self.redis.script_load(script.script)
        self._scripts_loaded = True
