"""Doughnut's users, found by their access tokens: whom a request on Doughnut's paths reads as.

Doughnut (b2c0268c09) takes ``Authorization: Bearer <token>``, looks the token up in ``user_token``
and reads as that user; a token it does not know reads as nobody (anonymous), which is no error by
itself (a bazaar notebook is readable without a user). It stores ``expires_at`` but never checks it;
this service refuses an expired token anyway, the way an unknown one is refused (it reads as nobody):
stricter than Doughnut, never a leak.

A lookup is remembered in this process for ``ttl_ms`` (``GRAPHRAG_TOKEN_CACHE_S``), so a revoked
token (its row deleted) still reads as its user for at most that long; an expiry is checked at every
use against the remembered ``expires_at``, so it takes effect at once. Tokens are remembered under
their SHA-256 only, and never logged or counted: the metric counts lookups by outcome. A database
that does not answer raises :class:`~graphrag.errors.DatabaseUnavailable` (503), never "allowed",
and is counted as the outcome ``error``.
What a user may read (owner, circle, subscription, bazaar) is not remembered here: it is read from
the database with each answer (service.viewers, graphrag.wiki.focus).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable

from graphrag import DatabaseUnavailable
from graphrag.wiki.model import Viewer
from service.ports import TokenOwner

__all__ = ["ANONYMOUS", "TokenBook"]

ANONYMOUS = Viewer()
_MAX_REMEMBERED = 10_000


class TokenBook:
    """Bearer tokens to viewers, through ``lookup`` (the ``user_token`` table), remembered briefly.

    ``on_lookup(outcome)`` is told each database lookup's outcome: ``user``, ``unknown``,
    ``expired`` or ``error`` (the database did not answer); ``clock_ms`` is monotonic (the
    cache), ``wall_ms`` the epoch (expiry)."""

    def __init__(self, lookup: Callable[[str], TokenOwner | None], *, ttl_ms: int,
                 clock_ms: Callable[[], int], wall_ms: Callable[[], int],
                 on_lookup: Callable[[str], object] = lambda _outcome: None) -> None:
        self._lookup, self.ttl_ms, self.clock_ms, self.wall_ms = lookup, ttl_ms, clock_ms, wall_ms
        self._on_lookup = on_lookup
        self._seen: OrderedDict[bytes, tuple[int, TokenOwner | None]] = OrderedDict()
        self._lock = threading.Lock()

    def viewer_of(self, token: str | None) -> Viewer:
        """The user a bearer token stands for; nobody for no, an unknown or an expired token."""
        owner = self._owner(token) if token else None
        if owner is None:
            return ANONYMOUS
        if owner.expires_at_ms is not None and owner.expires_at_ms <= self.wall_ms():
            return ANONYMOUS
        return Viewer(user_id=owner.user_id)

    def known(self, token: str) -> Viewer | None:
        """:meth:`viewer_of` a token whose lookup is remembered, without asking the database;
        None when it is not remembered (or no longer)."""
        remembered = self._remembered(_key(token), self.clock_ms())
        if remembered is None:
            return None
        owner = remembered[1]
        if owner is None or (owner.expires_at_ms is not None and owner.expires_at_ms <= self.wall_ms()):
            return ANONYMOUS
        return Viewer(user_id=owner.user_id)

    def _remembered(self, key: bytes, now: int) -> tuple[int, TokenOwner | None] | None:
        with self._lock:
            remembered = self._seen.get(key)
        return remembered if remembered is not None and now - remembered[0] < self.ttl_ms else None

    def _owner(self, token: str) -> TokenOwner | None:
        key, now = _key(token), self.clock_ms()
        remembered = self._remembered(key, now)
        if remembered is not None:
            return remembered[1]
        try:
            owner = self._lookup(token)
        except DatabaseUnavailable:
            self._on_lookup("error")
            raise
        self._on_lookup(self._outcome(owner))
        with self._lock:
            self._seen[key] = (now, owner)
            self._seen.move_to_end(key)
            while len(self._seen) > _MAX_REMEMBERED:
                self._seen.popitem(last=False)
        return owner

    def _outcome(self, owner: TokenOwner | None) -> str:
        if owner is None:
            return "unknown"
        expired = owner.expires_at_ms is not None and owner.expires_at_ms <= self.wall_ms()
        return "expired" if expired else "user"


def _key(token: str) -> bytes:
    """A token as it is remembered: its SHA-256 only."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
