"""The ports: everything the use cases need from the outside world, declared as Protocols.

Two sides (docs/architecture.md):

* :class:`NoteSource` reads Doughnut's database through one *schema profile* (a table layout and
  the graph model it yields). Batched: a computation's needs arrive as one object per round and
  the source answers each kind with a few IN statements.
* The Redis side is four small ports: :class:`SnapshotCache` (snapshots with their compare-and-set
  write, generations, the reverse index and edit stamps), :class:`DirtyQueue` (foci waiting for a
  rebuild), :class:`Coordination` (expiring locks, flags and claims) and :class:`ProgressLog` (a
  full rebuild's progress).
* :class:`SnapshotChanges` tells a watcher which watched foci had a snapshot written or deleted
  (what MCP subscriptions and ``graphrag context --follow`` re-check).
* :class:`QueueDepth` reads how many tasks wait on a broker queue (the nightly dispatcher's
  back-pressure), whichever broker carries them (Redis or RabbitMQ).
* :class:`SessionUsers` asks Doughnut's backend whose web session a cookie carries (service.sessions);
  the prefix's binding to one database is :class:`service.binding.PrefixBinding`.

Every implementation raises only the service's own errors (``graphrag.core.errors``): a driver error is
translated at the seam with ``raise ... from``, so no redis-py or SQLAlchemy type or exception ever
reaches a use case. Implementations: SQL profiles and Redis adapters in ``storage``, in-memory
ones in ``storage.memory`` and ``storage.memory_cache`` (fast tests, and the same contract suites run
against all of them).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from service.binding import DatabaseIdentity
from service.envelope import Envelope, Fact, SnapshotKey

__all__ = [
    "LANES",
    "ChangeListener",
    "Coordination",
    "Cursor",
    "DirtyQueue",
    "FeedBeat",
    "FeedHeartbeat",
    "Lane",
    "Lease",
    "Loader",
    "NoteSource",
    "Piece",
    "PositionStore",
    "ProgressLog",
    "QueueDepth",
    "SessionUsers",
    "SnapshotCache",
    "SnapshotChanges",
    "TokenOwner",
    "UserTokens",
]

#: Loads one round's need into a view (a batch's connection stays open between rounds).
Loader = Callable[[Any, Any], None]


@dataclass(frozen=True, slots=True)
class Piece:
    """Live notes a full rebuild loads and computes together: ``ids`` in (notebook, id) order;
    ``notebook`` is the last one's (None: in no notebook)."""

    notebook: int | None
    ids: list[int]

    @property
    def cursor(self) -> tuple[int | None, int]:
        """Where the pieces after this one start: (its notebook, its last id)."""
        return self.notebook, self.ids[-1]


#: (notebook or None, last id) of the piece handed out last; None before the first
Cursor = tuple[int | None, int] | None


class NoteSource(Protocol):
    """Read-only access to Doughnut's notes through one schema profile."""

    @property
    def profile(self) -> str:
        """The profile's name, e.g. ``doughnut-2025``."""

    @property
    def model(self) -> str:
        """The graph model it yields: ``tree`` or ``wiki`` (what strategies declare they need)."""

    def check(self) -> None:
        """Raise SchemaMismatch naming what is missing, or DatabaseUnavailable."""

    def ping(self) -> None:
        """Raise DatabaseUnavailable unless the database answers."""

    def batch(self) -> AbstractContextManager[Loader]:
        """A loader for one batch computation, on one connection for all its rounds."""

    def live_ids_after(self, after_id: int, limit: int) -> list[int]:
        """The next ``limit`` live note ids above ``after_id`` (keyset paging)."""

    def count_live(self) -> int:
        """How many live notes exist."""

    def workspaces(self, max_notes: int, *, after: Cursor = None) -> Iterator[Piece]:
        """Every live note once, in the pieces a full rebuild loads and computes together:
        notebooks by ascending id, each one's live notes by ascending id, then the notes in no
        notebook, packed into pieces of at most ``max_notes`` (small notebooks share one, a big
        one spans several); ``after`` (the cursor of a piece already handed out) continues after
        it (service.full_rebuild, storage.pieces)."""

    def any_note(self) -> bool:
        """Whether any note row exists, deleted ones included."""

    def identity(self) -> DatabaseIdentity:
        """The database as its content names it (service.binding): layout, name, oldest notes."""

    def edit_scope(self, roots: Iterable[int], *, limit: int = 10_000) -> set[int]:
        """The notes a delete or restore of ``roots`` changes together with them (tree: the subtree,
        the link notes pointing into it and the link notes pointing at those, whose object goes and
        comes back), ``roots`` included; bounded by ``limit``. On the tree it is also what a move
        of ``roots`` affects below them (service.tree_events)."""

    def referrers_of(self, ids: Iterable[int]) -> dict[int, set[int]]:
        """Per id, every note linking to it, deleted or not (tree: link notes targeting it; wiki:
        notes with a link row to it)."""

    def access_reach(self, notebooks: Iterable[int], circles: Iterable[int],
                     ownerships: Iterable[int]) -> tuple[set[int], set[int]]:
        """(the ``notebooks`` and those the ``circles`` or ``ownerships`` own, the targets of the
        links of the live notes in them): what an access change there can change
        (service.wiki_events); the tree has neither (two empty sets)."""


class SnapshotCache(Protocol):
    """Snapshots, their generations, the reverse index and edit stamps (docs/redis.md)."""

    soft_ttl_s: int
    hard_ttl_s: int

    def read(self, key: SnapshotKey) -> bytes | None:
        """The stored bytes of one snapshot (one round trip), or None; a foreign value is None."""

    def read_current(self, key: SnapshotKey) -> tuple[bytes | None, int]:
        """(the stored bytes or None, the note's generation counter) in one round trip: a snapshot
        whose generation is below the counter was computed before an event that affects it."""

    def write_many(self, envelopes: Sequence[Envelope]) -> list[bool]:
        """Compare-and-set every envelope (refused when its generation is older than the note's)
        and keep the reverse index exact; the accepted flags, in order."""

    def delete_focus(self, note_id: int, keys: Iterable[SnapshotKey], *,
                     generation: int | None) -> bool:
        """Remove a focus's snapshots (those recorded plus ``keys``) and their index entries; with a
        ``generation`` a compare-and-set (False when the note moved on)."""

    def generations(self, note_ids: Iterable[int]) -> dict[int, int]:
        """Each note's generation counter (missing = 0)."""

    def bump_generations(self, note_ids: Iterable[int]) -> dict[int, int]:
        """Advance each note's generation, strictly increasing even after the counter was lost."""

    def current_seq(self) -> int:
        """The global edit sequence (missing = 0); never moves backwards."""

    def stamp_touched(self, note_ids: Iterable[Fact]) -> int:
        """Take the next sequence number and stamp every note (or fact) with it (never lowering a
        stamp)."""

    def touched_since(self, note_ids: Iterable[Fact], seq: int) -> set[Fact]:
        """The notes (or facts) whose latest stamp is newer than ``seq``."""

    def dependents(self, note_ids: Iterable[Fact]) -> set[int]:
        """The foci whose snapshots (any variant) show any of ``note_ids`` (or read these facts),
        and those a reader keeps a viewer's view of that read them (:meth:`watch_view`)."""

    def watch_view(self, focus: int, facts: Iterable[Fact], *, ttl_ms: int) -> None:
        """Count ``focus`` among the :meth:`dependents` of every fact for ``ttl_ms``: a reader
        keeps a viewer's own view of it that read them. Apart from the snapshots' reverse index,
        which stays exactly what the stored snapshots show."""

    def shown_by(self, focus_ids: Iterable[int]) -> dict[int, set[Fact]]:
        """Per focus, the union of the notes (or facts) its stored snapshots depend on."""

    def sample(self, count: int, rng: random.Random) -> list[bytes]:
        """Up to ``count`` stored snapshots drawn uniformly."""

    def ping(self) -> None:
        """Raise CacheUnavailable unless the cache answers."""


class Lease(Protocol):
    """An expiring, exclusive lock; lost by itself when its holder dies."""

    def acquire(self, *, wait_ms: int = 0) -> bool:
        """Take it, waiting up to ``wait_ms``; False when someone else holds it."""

    def renew(self) -> bool:
        """Extend a held lease to its full TTL; False when it was lost meanwhile."""

    def release(self) -> None:
        """Give it up; never raises (an expired or unreachable lease frees itself)."""


class Coordination(Protocol):
    """Expiring locks, flags and claims shared by every process of a deployment."""

    def lock(self, name: str, *, ttl_ms: int) -> Lease:
        """A service-wide lock (e.g. ``drain``)."""

    def snapshot_lock(self, key: SnapshotKey, *, ttl_ms: int) -> Lease:
        """The live-compute lock of one snapshot."""

    def claim_flag(self, name: str, *, ttl_ms: int) -> bool:
        """True for the one caller that sets the flag; it expires by itself."""

    def clear_flag(self, name: str) -> None:
        """Drop a flag."""

    def claim_refresh(self, note_id: int, *, ttl_s: int) -> bool:
        """True for the one caller that may queue a refresh of the note now."""

    def release_refresh(self, note_id: int) -> None:
        """Let the next stale read queue a refresh again."""

    def claim_delivery(self, token: str, *, ttl_s: int) -> bool:
        """True the first time a delivery id is claimed within ``ttl_s`` (replay guard)."""

    def seen_delivery(self, token: str) -> bool:
        """Whether a delivery id was claimed within its window."""


#: A lane of the dirty set (:class:`DirtyQueue`).
Lane = Literal["urgent", "near", "wide"]
#: The lanes, in the order drains serve them.
LANES: tuple[Lane, ...] = ("urgent", "near", "wide")


class DirtyQueue(Protocol):
    """Foci waiting for a rebuild, in ``shards`` shards of three lanes; an id leaves only after its
    rebuild was written (docs/architecture.md, "Draining").

    Each id lives in one shard (``shard_of``) and, there, in one lane: *urgent* (the edited notes
    and the foci that show them first), *near* (the rest of a small edit's affected set) or *wide*
    (the rest of a large one's). A drain serves the urgent lanes, then the near ones, then the wide
    ones. A drain *leases* what it takes: until the lease expires (the store's clock) no other take
    returns those ids, so any number of workers drain one lane side by side. A lease belongs to the
    (id, score) pair taken: only :meth:`done`, :meth:`renew` and :meth:`release` with that pair
    touch it, and an add that moves an id to a more urgent lane lets go of it.
    """

    @property
    def shards(self) -> int:
        """How many shards the ids are spread over."""

    def shard_of(self, note_id: int) -> int:
        """The shard ``note_id`` lives in."""

    def add(self, note_ids: Iterable[int], *, now_ms: int, lane: Lane = "wide") -> int:
        """Mark dirty in ``lane``, scored ``now_ms``; how many were new. An id already there always
        gets a new score: ``now_ms``, or one above its score when ``now_ms`` is not ahead of it, so
        :meth:`done` with a score taken before the add keeps it. An id already in a more urgent
        lane stays there; one in a less urgent lane moves to ``lane``."""

    def ready(self, *, settled_before_ms: float = float("inf")) -> list[int]:
        """Shards holding ids dirtied before ``settled_before_ms``: those with urgent ids first
        (oldest first), then those with near ids, then the rest, each by its lane's oldest id."""

    def ready_lanes(self, *, settled_before_ms: float = float("inf"),
                    ) -> tuple[list[int], list[int], list[int]]:
        """For each of :data:`LANES`, the shards whose lane holds ids dirtied before
        ``settled_before_ms``, by the lane's oldest id."""

    def take(self, limit: int, *, shard: int | None = None,
             settled_before_ms: float = float("inf"), lanes: Sequence[Lane] = LANES,
             lease_ms: int = 0) -> list[tuple[int, float]]:
        """Up to ``limit`` (id, score) pairs dirtied before ``settled_before_ms`` and under no live
        lease, kept in the set: the oldest of the first of ``lanes`` first, the batch filled up from
        the next (of one shard, or with ``shard=None`` of every shard); ``lease_ms``: lease them for
        that long (one shard only; ValueError with ``shard=None``)."""

    def renew(self, taken: Sequence[tuple[int, float]], *, lease_ms: int) -> int:
        """Extend the leases of the pairs still leased with their score to ``lease_ms`` from now;
        how many were."""

    def release(self, taken: Sequence[tuple[int, float]]) -> int:
        """Let go of the leases of the pairs still leased with their score (their ids stay dirty,
        takeable at once); how many were."""

    def done(self, taken: Sequence[tuple[int, float]]) -> int:
        """Remove the pairs whose score is unchanged since ``take``, and let go of every lease
        taken with those pairs; how many were removed."""

    def size(self) -> int:
        """How many ids wait."""

    def oldest_ms(self) -> float | None:
        """The score of the longest-waiting id."""

    def adopt(self) -> int:
        """Move ids left outside today's shards (a changed shard count, an older unsharded set) into
        their shards; how many moved."""


class PositionStore(Protocol):
    """Where change capture keeps its place in the database's log (no TTL: losing it means a full
    rebuild). A position is opaque text (``storage.binlog.BinlogPosition.to_text``)."""

    def get(self) -> str | None: ...

    def put(self, position: str) -> None: ...

    def forget(self) -> None:
        """Remove it (change capture retired here)."""


@dataclass(frozen=True, slots=True)
class FeedBeat:
    """The change feed's last heartbeat: ``age_ms`` since it was written (the cache's clock), and
    how far the applied position trailed the server's then (``behind_ms``: how long ago the server
    was where the feed had got to; -1 while unknown, a feed that has not caught up since it
    started)."""

    age_ms: int
    behind_ms: int


class FeedHeartbeat(Protocol):
    """The change feed's proof of life (service.feed), kept beside its position (no TTL: a
    heartbeat that stopped must read as old, not as absent)."""

    def beat(self, *, behind_ms: int) -> None:
        """Record now (the cache's clock) and how far behind the server the feed is (-1: unknown)."""

    def read(self) -> FeedBeat | None:
        """The last heartbeat, aged on the cache's clock; None when change capture never ran."""

    def forget(self) -> None:
        """Remove it (change capture retired: nothing to wait for)."""


@dataclass(frozen=True, slots=True)
class TokenOwner:
    """One row of Doughnut's ``user_token``: whose access token it is, and when it expires (epoch
    milliseconds; None: never)."""

    user_id: int
    expires_at_ms: int | None


class UserTokens(Protocol):
    """Doughnut's access tokens (today's Doughnut only; read-only)."""

    def token_owner(self, token: str) -> TokenOwner | None:
        """The row of ``token`` (compared as Doughnut's database compares it), or None."""


class SessionUsers(Protocol):
    """Doughnut's own answer to whose web session a request carries (its backend, over HTTP)."""

    def session_user(self, cookie: str) -> int | None:
        """The user id of the session the ``Cookie`` header names, or None (no session, or a
        principal with no user row); raises Unavailable when Doughnut cannot be asked."""


class ChangeListener(Protocol):
    """One watcher's hearing of snapshot writes and deletions, for the foci it watches.

    ``heard`` returns each watched focus of which something was heard since its last call: a write
    or deletion of any of its snapshots, and also a watch that has just taken effect (or been taken
    up again after a lost connection). Whoever calls it re-reads what it shows of those foci and
    compares: the listener says "look again", never "this changed", so nothing that happened while
    a watch was being set up or the connection was down is missed. ``watch`` and ``unwatch`` may be
    called from any thread; ``heard`` from one thread at a time.
    """

    def watch(self, note_ids: Iterable[int]) -> None:
        """Start hearing of these foci (in effect by a later ``heard``, which reports each)."""

    def unwatch(self, note_ids: Iterable[int]) -> None:
        """Stop hearing of these foci."""

    def watching(self) -> set[int]:
        """The foci watched now."""

    def heard(self, timeout_s: float) -> set[int]:
        """Watched foci heard of since the last call, waiting up to ``timeout_s`` for the first;
        raises CacheUnavailable while the cache cannot be reached."""

    def close(self) -> None:
        """Stop hearing anything; releases the connection."""


class SnapshotChanges(Protocol):
    """Where watchers hear of snapshot writes (published by the cache's writes themselves)."""

    def listener(self) -> ChangeListener:
        """A new listener, watching nothing yet."""


class ProgressLog(Protocol):
    """One full-rebuild run's progress (``graphrag rebuild --status``)."""

    def start(self, run_id: str, *, now_ms: int) -> None: ...

    def enqueued(self, run_id: str, count: int, *, last_id: int) -> None: ...

    def dispatched(self, run_id: str, *, now_ms: int) -> None: ...

    def done(self, run_id: str, count: int, *, errors: int, now_ms: int) -> None: ...

    def status(self) -> Mapping[str, int | str]: ...


class QueueDepth(Protocol):
    """The task broker's queues, as far as back-pressure needs them."""

    def waiting(self, queue: str) -> int:
        """Messages ready on ``queue`` (not yet delivered to a worker); 0 if it does not exist."""
