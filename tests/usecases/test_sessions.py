"""Whom a request on Doughnut's paths reads as (service.sessions): Doughnut's order (a known token,
then the web session, then nobody), the session asked of Doughnut once per ``ttl_ms`` and cookie,
remembered under a digest only, and a Doughnut that cannot be asked never taken for "nobody"."""

from __future__ import annotations

import pytest

from graphrag.core.errors import Unavailable
from service.ports import TokenOwner
from service.sessions import SessionBook, Viewers
from service.users import ANONYMOUS, TokenBook

TTL_MS = 30_000


class Doughnut:
    """Doughnut's answer to whose session a cookie is, counting the questions."""

    def __init__(self, sessions: dict[str, int | None]) -> None:
        self.sessions, self.asked, self.down = sessions, [], False

    def session_user(self, cookie: str) -> int | None:
        self.asked.append(cookie)
        if self.down:
            raise Unavailable("Doughnut did not say who is signed in (ConnectError)")
        return self.sessions.get(cookie)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def books(doughnut: Doughnut, clock: Clock) -> tuple[Viewers, list[str]]:
    outcomes: list[str] = []
    tokens = TokenBook({"t-ann": TokenOwner(7, None)}.get, ttl_ms=5_000, clock_ms=clock,
                       wall_ms=lambda: 10**12)
    sessions = SessionBook(doughnut, ttl_ms=TTL_MS, clock_ms=clock, on_lookup=outcomes.append)
    return Viewers(tokens, sessions), outcomes


def test_a_known_token_wins_and_the_session_is_not_asked() -> None:
    doughnut = Doughnut({"SESSION=b": 9})
    viewers, _ = books(doughnut, Clock())
    assert viewers.viewer_of("t-ann", "SESSION=b").user_id == 7
    assert doughnut.asked == []


def test_an_unknown_token_or_none_falls_back_to_the_session() -> None:
    doughnut = Doughnut({"SESSION=b": 9})
    viewers, outcomes = books(doughnut, Clock())
    assert viewers.viewer_of("not-a-token", "SESSION=b").user_id == 9
    assert viewers.viewer_of(None, "SESSION=b").user_id == 9
    assert doughnut.asked == ["SESSION=b"], "remembered: asked once"
    assert outcomes == ["user"]


def test_no_cookie_or_no_session_is_nobody() -> None:
    doughnut = Doughnut({})
    viewers, outcomes = books(doughnut, Clock())
    assert viewers.viewer_of(None, None) == ANONYMOUS
    assert viewers.viewer_of(None, "") == ANONYMOUS
    assert doughnut.asked == []
    assert viewers.viewer_of(None, "SESSION=gone") == ANONYMOUS
    assert outcomes == ["anonymous"]


def test_an_answer_is_remembered_for_the_ttl_only() -> None:
    doughnut, clock = Doughnut({"SESSION=b": 9}), Clock()
    viewers, _ = books(doughnut, clock)
    viewers.viewer_of(None, "SESSION=b")
    clock.ms += TTL_MS - 1
    viewers.viewer_of(None, "SESSION=b")
    assert len(doughnut.asked) == 1
    doughnut.sessions["SESSION=b"] = None  # signed out
    clock.ms += 1
    assert viewers.viewer_of(None, "SESSION=b") == ANONYMOUS
    assert len(doughnut.asked) == 2


def test_a_doughnut_that_cannot_be_asked_is_an_error_never_nobody_and_is_not_remembered() -> None:
    doughnut = Doughnut({"SESSION=b": 9})
    doughnut.down = True
    viewers, outcomes = books(doughnut, Clock())
    with pytest.raises(Unavailable):
        viewers.viewer_of(None, "SESSION=b")
    doughnut.down = False
    assert viewers.viewer_of(None, "SESSION=b").user_id == 9
    assert outcomes == ["error", "user"]


def test_cookies_are_remembered_by_digest_only() -> None:
    doughnut = Doughnut({"SESSION=secret-value": 9})
    viewers, _ = books(doughnut, Clock())
    viewers.viewer_of(None, "SESSION=secret-value")
    assert viewers.sessions is not None
    remembered = repr(vars(viewers.sessions))
    assert "secret-value" not in remembered


def test_without_doughnut_to_ask_a_cookie_without_a_known_token_is_handed_on() -> None:
    tokens = TokenBook({"t-ann": TokenOwner(7, None)}.get, ttl_ms=5_000, clock_ms=Clock(),
                       wall_ms=lambda: 10**12)
    viewers = Viewers(tokens)
    assert viewers.viewer_of("t-ann", "SESSION=b").user_id == 7
    assert viewers.viewer_of(None, None) == ANONYMOUS
    with pytest.raises(Unavailable, match="GRAPHRAG_DOUGHNUT_URL"):
        viewers.viewer_of("unknown", "SESSION=b")
