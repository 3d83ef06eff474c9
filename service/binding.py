"""One cache per database: a key prefix is bound to the identity of the database it was filled from.

Two deployments that share a Redis and a key prefix but read different databases (staging beside
production, a test run, a copy under another name) would otherwise serve each other's snapshots as
fresh hits: nothing in a snapshot's key says which database it came from. So the prefix carries a
binding (``<prefix>:binding``, docs/redis.md), and every process that reads or writes snapshots checks
it when it starts (:func:`check_binding`): an unbound prefix is bound to this database, a prefix
bound to this database passes, and a prefix bound to another one is refused with one line naming
both (:class:`PrefixOfAnotherDatabase`). Only an explicit take-over (``graphrag prefix take-over``)
moves a binding: it deletes what the prefix holds, binds it anew and queues a full rebuild.

**The identity** (:class:`DatabaseIdentity`) is what a database's content says about itself, so
that a read replica and its primary (the same rows, the same name, another server) are one
database, while two databases of the same name on two servers are not: the table layout, the
database's name (a SQLite file's absolute path) and the ids and creation times of its oldest notes
(Doughnut never changes either), hashed. A copy under another name is another database; a dump
restored under the same name on another server is, until it diverges from its oldest rows, the same
data and the same identity: give such a copy its own ``GRAPHRAG_REDIS_PREFIX``.

**Every snapshot carries it too**: a process stamps its snapshots with its identity's digest and a
reader serves only snapshots stamped with its own (service.envelope), so even a process of the
other deployment that kept running after a take-over cannot have its writes served here.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import orjson

from graphrag.core.errors import CacheUnavailable, ConfigurationError, DatabaseUnavailable

__all__ = ["UNSTAMPED", "DatabaseIdentity", "DatabaseStamp", "PrefixBinding",
           "PrefixOfAnotherDatabase", "check_binding", "take_over"]

log = logging.getLogger("graphrag.binding")

#: how many of the oldest notes name a database
OLDEST_NOTES = 8
_DIGEST_HEX = 16
#: the stamp of a process that checks no binding (a test's or a tool's own store)
UNSTAMPED = ""
#: how long a process whose database did not answer waits before asking again (hot paths ask)
RETRY_MS = 5_000


@dataclass(frozen=True, slots=True)
class DatabaseIdentity:
    """A database as its content names it: ``digest`` (16 hex digits, stamped on every snapshot)
    and a ``description`` a person recognizes (layout, name, oldest note)."""

    digest: str
    description: str

    @classmethod
    def of(cls, layout: str, name: str, oldest: Sequence[tuple[int, str]]) -> DatabaseIdentity:
        """From the layout, the database's name and its oldest notes' (id, creation time)."""
        material = orjson.dumps([layout, name, [[i, t] for i, t in oldest]])
        digest = hashlib.sha256(material).hexdigest()[:_DIGEST_HEX]
        first = f"oldest note {oldest[0][0]} of {oldest[0][1]}" if oldest else "no notes yet"
        return cls(digest, f"{layout} database {name!r}, {first}")

    def to_bytes(self) -> bytes:
        return orjson.dumps({"digest": self.digest, "description": self.description})

    @classmethod
    def from_bytes(cls, raw: bytes) -> DatabaseIdentity | None:
        """The stored binding, or None when it is not one (then it binds nothing)."""
        try:
            data = orjson.loads(raw)
            return cls(str(data["digest"]), str(data["description"]))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None

    def __str__(self) -> str:
        return f"{self.description} [{self.digest}]"


class PrefixBinding(Protocol):
    """Where a key prefix records the database it belongs to (storage.redis.binding)."""

    prefix: str

    def bound(self) -> DatabaseIdentity | None:
        """The database the prefix belongs to, or None while it belongs to none."""

    def bind(self, identity: DatabaseIdentity) -> DatabaseIdentity:
        """Bind an unbound prefix to ``identity``; return the identity it is bound to now
        (another one when a process of another database bound it first)."""

    def clear_and_bind(self, identity: DatabaseIdentity) -> int:
        """Delete every key under the prefix (the scheduler's excepted), then bind it to
        ``identity``; return how many keys were deleted."""


class PrefixOfAnotherDatabase(ConfigurationError):
    """The key prefix holds the snapshots of another database."""

    def __init__(self, prefix: str, bound: DatabaseIdentity, mine: DatabaseIdentity) -> None:
        self.bound, self.mine = bound, mine
        super().__init__(
            f"the key prefix {prefix!r} holds the snapshots of {bound}, not of this database, "
            f"{mine}: give this deployment its own GRAPHRAG_REDIS_PREFIX, or take the prefix over "
            "with `graphrag prefix take-over` (deletes what it holds, then rebuilds)")


def check_binding(binding: PrefixBinding, mine: DatabaseIdentity) -> None:
    """Pass when the prefix is (now) bound to ``mine``; raise naming both identities otherwise."""
    bound = binding.bound() or binding.bind(mine)
    if bound.digest != mine.digest:
        raise PrefixOfAnotherDatabase(binding.prefix, bound, mine)


def take_over(binding: PrefixBinding, mine: DatabaseIdentity) -> int:
    """Make the prefix this database's, deleting what it held; returns the keys deleted. The caller
    queues the full rebuild that fills it again."""
    return binding.clear_and_bind(mine)


class DatabaseStamp:
    """The digest this process stamps on the snapshots it writes and expects on those it serves.

    :meth:`check` reads this database's identity and checks the prefix's binding; a prefix of
    another database raises :class:`PrefixOfAnotherDatabase`, now and at every later use. A process
    calls it when it starts; if the database (or Redis) does not answer then, :attr:`digest` asks
    again at its first use and at most every :data:`RETRY_MS` after, and meanwhile is the prefix's
    bound digest, provisionally: a reader that starts while the database is down keeps serving the
    snapshots the prefix vouches for, and learns the truth when the database answers."""

    def __init__(self, identity: Callable[[], DatabaseIdentity], binding: PrefixBinding,
                 clock_ms: Callable[[], int]) -> None:
        self._identity, self._binding, self._clock_ms = identity, binding, clock_ms
        self._checked: str | None = None
        self._refused: PrefixOfAnotherDatabase | None = None
        self._provisional, self._next_ms = UNSTAMPED, 0
        self._lock = threading.Lock()

    def check(self) -> DatabaseIdentity:
        """This database's identity, the prefix bound to it; raises PrefixOfAnotherDatabase, or
        DatabaseUnavailable / CacheUnavailable when either cannot be asked."""
        mine = self._identity()
        try:
            check_binding(self._binding, mine)
        except PrefixOfAnotherDatabase as err:
            self._refused = err
            raise
        self._checked = mine.digest
        return mine

    def confirmed(self) -> str:
        """The digest to stamp on a snapshot written now: checked (now, if it was not yet), never
        provisional. A provisional digest on a write would outlive the guess: a snapshot of the
        database that answers stamped as the prefix's, or one stamped as no database's that no
        reader serves. Raises as :meth:`check` does."""
        if self._checked is not None:
            return self._checked
        with self._lock:
            if self._refused is not None:
                raise self._refused
            return self._checked or self.check().digest

    @property
    def digest(self) -> str:
        if self._checked is not None:
            return self._checked
        with self._lock:
            if self._refused is not None:
                raise self._refused
            if self._checked is None and self._clock_ms() >= self._next_ms:
                self._try_check()
            return self._checked or self._provisional

    def _try_check(self) -> None:
        try:
            self.check()
        except PrefixOfAnotherDatabase as err:
            log.error("%s", err)
            raise
        except (DatabaseUnavailable, CacheUnavailable) as err:
            self._next_ms = self._clock_ms() + RETRY_MS
            self._provisional = self._bound_digest()
            log.warning("the prefix's database is not checked yet (%s): serving the snapshots it "
                        "holds as %s's until it is", err, self._provisional or "no database")

    def _bound_digest(self) -> str:
        try:
            bound = self._binding.bound()
        except CacheUnavailable:
            return self._provisional
        return bound.digest if bound is not None else UNSTAMPED
