"""Doughnut's backend over HTTP: whose web session a ``Cookie`` header carries.

``GET /api/user/current-user-info`` (b2c0268c09, ``CurrentUserInfoController``) answers every
caller, signed in or not, with ``{"user": <the user, or null>, "externalIdentifier": ...}``: null
when the request carries no session, or a session whose principal has no user row yet. Only the
request's ``Cookie`` header is sent (no bearer token: Doughnut would read the token first).

Anything else (no connection, a timeout, a status other than 200, a redirect to a login page, a
body that is not that JSON) raises :class:`~graphrag.core.errors.Unavailable` naming what went
wrong but never the cookie: the caller cannot tell who is signed in, which is not "nobody".
One pooled client per process keeps its connections to Doughnut open between questions.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from graphrag.core.errors import Unavailable

__all__ = ["DoughnutSessions"]

PATH = "/api/user/current-user-info"


class DoughnutSessions:
    """:class:`service.ports.SessionUsers` over Doughnut's backend at ``base_url``."""

    def __init__(self, base_url: str, *, timeout_s: float = 2.0) -> None:
        self._client = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s,
                                    follow_redirects=False, trust_env=False)

    def session_user(self, cookie: str) -> int | None:
        try:
            response = self._client.get(PATH, headers={"Cookie": cookie,
                                                       "Accept": "application/json"})
        except (httpx.HTTPError, UnicodeError) as err:
            raise Unavailable(f"Doughnut did not say who is signed in ({err.__class__.__name__})") \
                from err
        if response.status_code != 200:
            raise Unavailable(f"Doughnut answered {response.status_code} to {PATH}")
        return _user_id(response.content)

    def close(self) -> None:
        self._client.close()


def _user_id(body: bytes) -> int | None:
    try:
        info: Any = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise Unavailable(f"Doughnut's answer to {PATH} is not JSON") from err
    if not isinstance(info, dict) or "user" not in info:
        raise Unavailable(f"Doughnut's answer to {PATH} has no user member")
    user = info["user"]
    if user is None:
        return None
    user_id = user.get("id") if isinstance(user, dict) else None
    if type(user_id) is not int:
        raise Unavailable(f"Doughnut's answer to {PATH} names no user id")
    return user_id
