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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import orjson

from graphrag.core.errors import ConfigurationError

__all__ = ["DatabaseIdentity", "PrefixBinding", "PrefixOfAnotherDatabase", "check_binding",
           "take_over"]

#: how many of the oldest notes name a database
OLDEST_NOTES = 8
_DIGEST_HEX = 16


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
