"""Doughnut's users, found by their access tokens: whom a request on Doughnut's paths reads as.

Doughnut (b2c0268c09) takes ``Authorization: Bearer <token>``, looks the token up in ``user_token``
and reads as that user; a token it does not know reads as nobody (anonymous), which is no error by
itself (a bazaar notebook is readable without a user). It stores ``expires_at`` but never checks it;
this service refuses an expired token anyway, the way an unknown one is refused (it reads as nobody):
stricter than Doughnut, never a leak.

A lookup is remembered in this process while the access epoch holds (service.access): with change
capture, until a row of ``user_token`` (or another access table) changes, so a revoked token is
refused within the feed's lag; without it, also at most ``ttl_ms`` (``GRAPHRAG_TOKEN_CACHE_S``). An
expiry is checked at every use against the remembered ``expires_at``, so it takes effect at once.
Tokens are remembered under their SHA-256 only, and never logged or counted: the metric counts
lookups by outcome. A database that does not answer raises
:class:`~graphrag.errors.DatabaseUnavailable` (503), never "allowed", and is counted as the outcome
``error``. What a user may read is remembered by the reader the same way (service.reader.snapshot).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from graphrag import DatabaseUnavailable
from graphrag.wiki.model import Viewer
from service.access import Remembered
from service.ports import TokenOwner

__all__ = ["ANONYMOUS", "TokenBook"]

ANONYMOUS = Viewer()


class TokenBook:
    """Bearer tokens to viewers, through ``lookup`` (the ``user_token`` table), remembered while
    the access epoch holds and, without change capture (``ttl_ms`` not None), at most ``ttl_ms``
    (service.access).

    ``on_lookup(outcome)`` is told each database lookup's outcome: ``user``, ``unknown``,
    ``expired`` or ``error`` (the database did not answer); ``clock_ms`` is monotonic (the
    memo), ``wall_ms`` the epoch (expiry); ``epoch`` the access epoch (service.access)."""

    def __init__(self, lookup: Callable[[str], TokenOwner | None], *, ttl_ms: int | None,
                 clock_ms: Callable[[], int], wall_ms: Callable[[], int],
                 on_lookup: Callable[[str], object] = lambda _outcome: None,
                 epoch: Callable[[], int] = lambda: 0) -> None:
        self._lookup, self.ttl_ms, self.wall_ms = lookup, ttl_ms, wall_ms
        self._on_lookup = on_lookup
        self._seen: Remembered[TokenOwner | None] = Remembered(epoch=epoch, clock_ms=clock_ms,
                                                               ttl_ms=ttl_ms)

    def viewer_of(self, token: str | None) -> Viewer:
        """The user a bearer token stands for; nobody for no, an unknown or an expired token."""
        return self._viewer(self._owner(token) if token else None)

    def known(self, token: str) -> Viewer | None:
        """:meth:`viewer_of` a token whose lookup is remembered, without asking the database;
        None when it is not remembered (or no longer)."""
        found, owner = self._seen.get(_key(token))
        return self._viewer(owner) if found else None

    def _viewer(self, owner: TokenOwner | None) -> Viewer:
        if owner is None or (owner.expires_at_ms is not None and owner.expires_at_ms <= self.wall_ms()):
            return ANONYMOUS
        return Viewer(user_id=owner.user_id)

    def _owner(self, token: str) -> TokenOwner | None:
        key = _key(token)
        found, owner = self._seen.get(key)
        if found:
            return owner
        epoch, at_ms = self._seen.started()
        try:
            owner = self._lookup(token)
        except DatabaseUnavailable:
            self._on_lookup("error")
            raise
        self._on_lookup(self._outcome(owner))
        self._seen.put(key, owner, epoch=epoch, at_ms=at_ms)
        return owner

    def _outcome(self, owner: TokenOwner | None) -> str:
        if owner is None:
            return "unknown"
        expired = owner.expires_at_ms is not None and owner.expires_at_ms <= self.wall_ms()
        return "expired" if expired else "user"


def _key(token: str) -> bytes:
    """A token as it is remembered: its SHA-256 only."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
