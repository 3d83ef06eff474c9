"""Doughnut's web app through the shipped proxy: a browser's request carries Doughnut's session
cookie and no bearer token (the note export dialog), and is answered as that session's user.

Debian's nginx runs ops/nginx/graphrag.conf in front of a stub of Doughnut's backend that knows web
sessions (``GET /api/user/current-user-info`` by cookie) and of this service's public listener
(worker.http.public, tests/doughnut_users.py: MariaDB 2026 users, snapshots in the real Redis):

* a cookie-only request of an owner, a subscriber, a stranger, and one with no cookie at all, gets
  the status and bytes of that user's live answer;
* an unknown bearer token with a valid session answers as the session's user (Doughnut's order);
* with Doughnut's user endpoint down, Doughnut answers the request (the proxy hands the service's
  503 to it), never a 401 that would send the browser to the sign-in page.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from graphrag.wiki.model import Viewer
from tests.doughnut_users import Site
from tests.proxy_support import SESSION_PATH, serve
from tests.test_proxy import NOT_LOGGED_IN, Stack, context, stacked
from tests.test_proxy import users as users  # the module's users and their snapshots

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

SESSIONS = {"SESSION=owner-1": 1, "SESSION=subscriber-2": 2, "SESSION=stranger-5": 5,
            "SESSION=no-user-yet": None}


@pytest.fixture
def stack(users: Site) -> Iterator[Stack]:
    with stacked(users) as running:
        running.stub.sessions.update(SESSIONS)
        with serve(users.public(running.stub.url).app, running.service_port):
            yield running


def browser(stack: Stack, path: str, cookie: str | None, token: str | None = None) -> tuple[int, bytes]:
    headers = {} if cookie is None else {"Cookie": cookie}
    answer = stack.request("GET", path, token, headers=headers)
    assert "X-Graphrag-Source" in answer.headers or answer.status_code != 200, answer.content[:200]
    return answer.status_code, answer.content


def test_a_cookie_reads_as_its_sessions_user(users: Site, stack: Stack) -> None:
    for note, cookie, user in (("A", "SESSION=owner-1", 1), ("F", "SESSION=subscriber-2", 2),
                               ("Z", "SESSION=stranger-5", 5), ("Z", "SESSION=no-user-yet", None)):
        for markdown in (False, True):
            path = context(users, note, "ai-context-markdown" if markdown else "graph")
            want = users.live(note, viewer=Viewer(user_id=user), markdown=markdown)
            assert browser(stack, path, cookie) == (200, want), (note, cookie, markdown)
    asked = [seen for seen in stack.stub.received if seen.path == SESSION_PATH]
    assert {seen.headers["cookie"] for seen in asked} == set(SESSIONS)
    assert all("authorization" not in seen.headers for seen in asked)


def test_refusals_are_the_users_own(users: Site, stack: Stack) -> None:
    status, body = browser(stack, context(users, "A"), "SESSION=stranger-5")
    assert status == 403 and orjson.loads(body)["path"] == f"/api/notes/{users.notes['A']}/graph"
    assert browser(stack, context(users, "A"), None) == (401, NOT_LOGGED_IN)
    assert browser(stack, context(users, "A"), "SESSION=no-user-yet") == (401, NOT_LOGGED_IN)
    bazaar = users.live("Z", viewer=Viewer())
    assert browser(stack, context(users, "Z"), None) == (200, bazaar)


def test_an_unknown_token_falls_back_to_the_session_and_a_known_one_wins(
        users: Site, stack: Stack) -> None:
    path = context(users, "F")
    as_subscriber = users.live("F", viewer=Viewer(user_id=2))
    assert browser(stack, path, "SESSION=subscriber-2", "not-a-token") == (200, as_subscriber)
    as_owner = users.live("F", viewer=Viewer(user_id=1))
    assert browser(stack, path, "SESSION=subscriber-2", "tok-owner") == (200, as_owner)


def test_with_doughnuts_user_endpoint_down_doughnut_answers(users: Site, stack: Stack) -> None:
    stack.stub.sessions_down = True
    path = context(users, "A", "ai-context-markdown")
    answer = stack.request("GET", path, headers={"Cookie": "SESSION=owner-1"})
    assert answer.status_code == 200, answer.content
    assert orjson.loads(answer.content) == {"served_by": "doughnut-stub", "method": "GET",
                                            "path": path}
    direct = stack.request("GET", path, headers={"Cookie": "SESSION=owner-1"}, direct=True)
    assert direct.status_code == 503  # the service's own answer, which the proxy never shows
    # a token needs no session: still the service's answer
    owner = stack.request("GET", path, "tok-owner", headers={"Cookie": "SESSION=owner-1"})
    assert owner.headers.get("X-Graphrag-Source") is not None and owner.status_code == 200
