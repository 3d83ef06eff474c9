"""Doughnut's web sessions: whom a request carrying Doughnut's session cookie reads as.

Doughnut's web app signs users in with OAuth2 and keeps the session on Doughnut's side; the browser
sends only the session cookie, never a bearer token (the note export dialog's
``GET /api/notes/{id}/ai-context-markdown``). Doughnut finds the user of a request this way
(b2c0268c09, ``CurrentUserFetcherFromRequest``): a bearer token it knows names the user; otherwise
the session's principal does; otherwise nobody. :class:`Viewers` keeps that order: a token of
``user_token`` (service.users), then the session, then nobody.

Only Doughnut can say whose a session is, so the service asks it
(``GET /api/user/current-user-info`` with the request's ``Cookie`` header alone, on Doughnut's
backend address; :class:`service.ports.SessionUsers`) and remembers the answer for ``ttl_ms``
(``GRAPHRAG_SESSION_CACHE_S``): a session that logs out still reads as its user for at most that
long. The cookie is remembered under its SHA-256 only and never logged. When Doughnut cannot be
asked, :class:`~graphrag.core.errors.Unavailable` propagates: the HTTP surface answers 503, which the
shipped proxy hands to Doughnut itself, so the web app is answered by Doughnut rather than told to
sign in again (a 401 makes Doughnut's web client reload the page to log in).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from graphrag.core.errors import Unavailable
from graphrag.wiki.model import Viewer
from service.access import Remembered
from service.ports import SessionUsers
from service.users import ANONYMOUS, TokenBook

__all__ = ["SessionBook", "Viewers"]


class SessionBook:
    """Cookie headers to viewers, through ``sessions`` (Doughnut itself), remembered ``ttl_ms``.

    ``on_lookup(outcome)`` is told each question's outcome: ``user``, ``anonymous`` or ``error``
    (a failed question raises and is not remembered); ``clock_ms`` is monotonic."""

    def __init__(self, sessions: SessionUsers, *, ttl_ms: int, clock_ms: Callable[[], int],
                 on_lookup: Callable[[str], object] = lambda _outcome: None) -> None:
        self._sessions, self.ttl_ms = sessions, ttl_ms
        self._on_lookup = on_lookup
        # (Doughnut's sessions are no access row: no epoch moves them, the TTL alone ends them)
        self._seen: Remembered[int | None] = Remembered(epoch=lambda: 0, clock_ms=clock_ms,
                                                        ttl_ms=ttl_ms)

    def viewer_of(self, cookie: str) -> Viewer:
        """The session's user, or nobody; raises Unavailable when Doughnut cannot be asked."""
        key = hashlib.sha256(cookie.encode("utf-8", "surrogatepass")).digest()
        found, user_id = self._seen.get(key)
        if found:
            return _viewer(user_id)
        epoch, at_ms = self._seen.started()
        try:
            user_id = self._sessions.session_user(cookie)
        except Unavailable:
            self._on_lookup("error")
            raise
        self._on_lookup("anonymous" if user_id is None else "user")
        self._seen.put(key, user_id, epoch=epoch, at_ms=at_ms)
        return _viewer(user_id)


def _viewer(user_id: int | None) -> Viewer:
    return ANONYMOUS if user_id is None else Viewer(user_id=user_id)


class Viewers:
    """Whom a request on Doughnut's paths reads as, in Doughnut's order: a known bearer token's
    user, else the session's user when a cookie came, else nobody.

    Without ``sessions`` (no Doughnut to ask), a request that carries a cookie and no known token
    cannot be told apart from a signed-in user's: Unavailable, so that the proxy hands it to
    Doughnut, rather than an anonymous answer that would be the wrong one."""

    def __init__(self, tokens: TokenBook, sessions: SessionBook | None = None) -> None:
        self.tokens, self.sessions = tokens, sessions

    def known(self, bearer: str | None, cookie: str | None) -> Viewer | None:
        """:meth:`viewer_of` without asking anybody: nobody for a request without a token or with
        a token remembered as naming nobody, and no cookie; the user of a remembered token; None
        otherwise (a token to look up, a web session to ask Doughnut about)."""
        viewer = ANONYMOUS if not bearer else self.tokens.known(bearer)
        return None if viewer is None or (viewer.anonymous and cookie) else viewer

    def viewer_of(self, bearer: str | None, cookie: str | None) -> Viewer:
        viewer = self.tokens.viewer_of(bearer)
        if not viewer.anonymous or not cookie:
            return viewer
        if self.sessions is None:
            raise Unavailable("a web session's request and GRAPHRAG_DOUGHNUT_URL is not set: "
                              "Doughnut answers it")
        return self.sessions.viewer_of(cookie)
