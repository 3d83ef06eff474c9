"""Hostile requests to the HTTP app (issue 6, item 3).

* Schema-driven fuzzing of every endpoint of ``app.openapi()``: schemathesis (positive and negative
  generation, with the valid bearer token and with generated ``Authorization`` headers) plus a
  hypothesis fuzzer over the same paths and parameters aimed at what schemathesis rarely sends
  (number-like strings, huge and negative numbers, digit look-alikes, repeated and unknown
  parameters, long paths, other methods). Every response must be < 500 without a traceback; the
  statuses must be the documented ones (200 schema-valid, 400 naming the parameter, 401, 404, 405).
* The reader without or with a wrong token -> 401.

The app runs in-process (:mod:`tests.reliability.fuzz_app`). Size: ``GRAPHRAG_RELIABILITY_SCALE``
(``ci``: >= 1,000 fuzzed HTTP requests; ``full``: >= 10,000). Webhook deliveries:
test_hostile_webhooks.py.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.fuzz_app import AUTH, TOKEN, WEBHOOK, Fuzz
from tests.reliability.fuzz_app import fuzz as fuzz  # a module fixture
from tests.reliability.support import check_result, figure, sized

#: schemathesis examples per (generation mode, authorization) run
SCHEMATHESIS_RUNS = {
    ("positive", "token"): sized(ci=300, full=3_000),
    ("negative", "token"): sized(ci=200, full=2_000),
    ("positive", "generated"): sized(ci=100, full=1_000),
}
CUSTOM_REQUESTS = sized(ci=600, full=5_000)
HTTP_TARGET = sized(ci=1_000, full=10_000)
GRAPH_ROUTE = re.compile(r"^/(api/)?notes/([^/]+)/(graph|context\.md|ai-context-markdown)$")
PARAMETERS = {"noteId", "tokenLimit", "seed", "strategy", "viewer"}


# -- checking one fuzzed response -------------------------------------------------------------------
def check_graph_response(fuzz: Fuzz, response: httpx.Response, *, authorized: bool) -> None:
    """What a GET on a graph route may answer (the route matched)."""
    status = response.status_code
    if not authorized:
        assert status == 401, (status, response.text[:300])
        assert response.headers.get("WWW-Authenticate") == "Bearer"
        return
    assert status in (200, 400, 404), (status, response.text[:300])
    if status == 200:
        assert response.headers["X-Graphrag-Source"] in ("cache", "stale", "live")
        assert int(response.headers["X-Graphrag-Age"]) >= 0
        if response.headers["content-type"].startswith("text/markdown"):
            assert response.text.startswith("#"), response.text[:300]
        elif response.url.path.endswith("/ai-context-markdown"):
            assert response.json()["markdown"].startswith("#"), response.text[:300]
        else:
            check_result(response.content, hidden=fuzz.deleted_ids)
    elif status == 400:
        body = response.json()
        assert body.get("parameter") in PARAMETERS and body.get("error"), body
    else:
        assert response.json().get("error"), response.text[:300]


def check_any(fuzz: Fuzz, method: str, response: httpx.Response, auth: Any) -> None:
    """Expectations for a request, by the (decoded) path that reached the app."""
    path = unquote(response.request.url.raw_path.decode().split("?")[0])
    match = GRAPH_ROUTE.match(path)
    if match and method == "GET":
        check_graph_response(fuzz, response, authorized=auth == AUTH)
    elif path in ("/healthz", "/metrics") and method == "GET":
        assert response.status_code == 200
    elif path == WEBHOOK and method == "POST":
        assert response.status_code in (400, 401, 413), response.text[:300]
    elif path in ("/healthz", "/metrics", WEBHOOK):
        assert response.status_code == 405, (method, path, response.status_code)
    elif auth != AUTH:  # the bearer gate answers before routing: nothing is revealed
        assert response.status_code == 401, (method, path, response.status_code)
    elif match:  # an id that still holds an escape after one decoding (%252F) routes nowhere
        allowed = (404, 405) if "%" in match.group(2) else (405,)
        assert response.status_code in allowed, (method, path, response.status_code)
    else:  # 307: FastAPI redirects a trailing slash (not followed here)
        assert response.status_code in (307, 404, 405), (method, path, response.status_code)


# -- schemathesis ---------------------------------------------------------------------------------
def _query_params(params: dict[str, Any] | None) -> list[tuple[str, str]]:
    """schemathesis' query dict as pairs: lists repeat the parameter, other non-strings as JSON."""
    out: list[tuple[str, str]] = []
    for name, value in (params or {}).items():
        for item in value if isinstance(value, list) else [value]:
            out.append((str(name), item if isinstance(item, str) else json.dumps(item)))
    return out


def _header_bytes(headers: dict[str, Any] | None) -> dict[str, bytes]:
    return {str(k): (v if isinstance(v, str) else json.dumps(v)).encode()
            for k, v in (headers or {}).items()}


def run_schemathesis(fuzz: Fuzz, mode: str, authorization: str) -> None:
    schema = schemathesis.openapi.from_dict(fuzz.app.openapi())
    fixed = {"authorization": AUTH} if authorization == "token" else None
    strategy = schema.as_strategy(generation_mode=schemathesis.GenerationMode(mode), headers=fixed)
    phase = f"schemathesis {mode}/{authorization}"

    @settings(max_examples=SCHEMATHESIS_RUNS[(mode, authorization)], deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def one(case: Any) -> None:
        sent = case.as_transport_kwargs(base_url="http://testserver")
        headers = _header_bytes(sent.get("headers"))
        url = sent["url"]
        response = fuzz.send(phase, sent["method"], url, params=_query_params(sent.get("params")),
                             headers=headers)
        auth = headers.get("authorization", b"").decode(errors="replace")
        check_any(fuzz, sent["method"], response, auth)

    one()


# -- the hypothesis fuzzer over the OpenAPI paths ---------------------------------------------------
EDGE = [
    "", " ", "0", "-0", "+1", "00012", " 12 ", "\t7\n", "1.0", "1e3", "0x10", "0o7", "0b1", "1_000",
    "nan", "NaN", "inf", "-inf", "Infinity", "null", "None", "true", "[]", "{}", "²", "٣", "１２", "⑦",
    "12\x00", "%00", "%", "%%", "%2F", "..", "../../etc/passwd", "9" * 12, "9" * 13, "-" + "9" * 11,
    str(2**31), str(2**32), str(2**63 - 1), str(2**63), str(-(2**63)), str(2**64), "1000000",
    "1000001", "5000", "1000", "1001", "400", "wavefront", "layered", "relationship-bfs", "WAVEFRONT",
    " layered", "'; DROP TABLE note; --", "1 OR 1=1", "<script>alert(1)</script>", "${jndi:ldap://x}",
    "\u202e", "🍩", "\ud7ff", "\ufeff1", "e\u0301",
]


def values(live_ids: frozenset[int]) -> st.SearchStrategy[str]:
    ids = sorted(live_ids)
    return st.one_of(
        st.sampled_from(ids).map(str),
        st.integers(min_value=-3, max_value=max(ids) + 5).map(str),
        st.integers(min_value=-(10**40), max_value=10**40).map(str),
        st.sampled_from(EDGE),
        st.text(max_size=40),
        st.tuples(st.sampled_from("9a/%-"), st.integers(1, 3_000)).map(lambda t: t[0] * t[1]),
        st.integers(1, 300).map(lambda n: "🍩" * n),
    )


@st.composite
def hostile_request(draw: st.DrawFn, operations: list[tuple[str, str, list[dict[str, Any]]]],
                    live_ids: frozenset[int]) -> tuple[str, str, str, list[tuple[str, str]],
                                                       dict[str, bytes], bytes | None]:
    template, method, parameters = draw(st.sampled_from(operations))
    if draw(st.integers(0, 9)) == 0:
        method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]))
    value = values(live_ids)
    path = template
    for p in parameters:
        if p["in"] == "path":
            raw = draw(value)
            safe = draw(st.sampled_from(["", "", "", "/%"]))
            path = path.replace("{" + p["name"] + "}", quote(raw, safe=safe))
    if draw(st.integers(0, 19)) == 0:
        path += draw(st.sampled_from(["/", "//", "/x", "/" + "y" * 3000, "%2F..", ";x=1"]))
    query: list[tuple[str, str]] = []
    for p in parameters:
        if p["in"] == "query":
            query += [(p["name"], draw(value)) for _ in range(draw(st.sampled_from([0, 1, 1, 2, 4])))]
    query += [(draw(st.text(min_size=1, max_size=10)), draw(value))
              for _ in range(draw(st.integers(0, 2)))]
    query = draw(st.permutations(query))
    auth = draw(st.sampled_from([AUTH, AUTH, AUTH, None, "garbage", AUTH + "x", AUTH[:-1],
                                 "bearer " + TOKEN, "Bearer  " + TOKEN, TOKEN, "Basic " + TOKEN]))
    headers = {} if auth is None else {"authorization": auth.encode()}
    if draw(st.booleans()):
        headers["x-" + draw(st.sampled_from(["junk", "forwarded-for", "request-id"]))] = draw(
            st.binary(max_size=64).filter(lambda b: b"\r" not in b and b"\n" not in b))
    content = draw(st.none() | st.binary(max_size=256)) if method != "GET" else None
    return method, template, path, query, headers, content


def run_custom(fuzz: Fuzz) -> None:
    spec = fuzz.app.openapi()
    operations = [(path, method.upper(), op.get("parameters", []))
                  for path, item in spec["paths"].items() for method, op in item.items()]

    @settings(max_examples=CUSTOM_REQUESTS, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(request=hostile_request(operations, fuzz.live_ids))
    def one(request: tuple[Any, ...]) -> None:
        method, _template, path, query, headers, content = request
        response = fuzz.send("hypothesis over OpenAPI paths", method, "http://testserver" + path,
                             params=query, headers=headers, content=content)
        auth = headers.get("authorization", b"").decode()
        check_any(fuzz, method, response, auth)

    one()


def test_fuzzing_every_endpoint_gives_no_server_error(fuzz: Fuzz) -> None:
    started = time.perf_counter()
    timings = {}
    for mode, authorization in SCHEMATHESIS_RUNS:
        run_schemathesis(fuzz, mode, authorization)
        timings[f"{mode}/{authorization}"] = round(time.perf_counter() - started)
    run_custom(fuzz)
    timings["custom"] = round(time.perf_counter() - started)
    figure("fuzzing phases done at (s)", timings)
    stats = fuzz.stats
    seconds = time.perf_counter() - started
    figure("fuzzed HTTP requests", f"{stats.total} in {seconds:.0f} s ({dict(stats.by_phase)})")
    figure("HTTP responses >= 500", len(stats.server_errors))
    figure("HTTP statuses", dict(sorted(stats.statuses.items())))
    assert stats.server_errors == []
    assert stats.total >= HTTP_TARGET, stats.by_phase
    assert stats.statuses[200] > 0 and stats.statuses[400] > 0 and stats.statuses[401] > 0
    assert fuzz.recorder.calls == [], "an unsigned request was enqueued"


# -- the reader's bearer token --------------------------------------------------------------------
def _stable_id(authorization: str | bytes | None) -> str:
    """A test id without the random token, so that every parallel worker collects the same names."""
    text = repr(authorization)
    for form, name in ((TOKEN, "TOKEN"), (TOKEN[:-1], "TOKEN[:-1]"), (TOKEN.upper(), "UPPER")):
        text = text.replace(form, name)
    return text[:30]


@pytest.mark.parametrize("authorization", [
    None, "", "Bearer", "Bearer ", TOKEN, f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}",
    f"bearer {TOKEN}", f"Bearer\t{TOKEN}", f"Bearer {TOKEN} ", f"Basic {TOKEN}",
    f"Bearer {TOKEN.upper()}", "Bearer " + "x" * 100_000, f"Bearer {TOKEN}é".encode(),
    b"Bearer \xff\xfe",
], ids=_stable_id)
@pytest.mark.parametrize("path", ["/notes/224/graph", "/api/notes/224/graph?tokenLimit=300",
                                  "/notes/abc/graph?seed=x", "/notes/999999/graph"])
def test_reader_without_or_with_a_wrong_token_is_401(
    fuzz: Fuzz, path: str, authorization: str | bytes | None
) -> None:
    headers = {} if authorization is None else {"authorization": authorization}
    response = fuzz.send("bearer token", "GET", "http://testserver" + path, headers=headers)
    assert response.status_code == 401, response.text[:200]
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert b"focusNote" not in response.content and TOKEN not in response.text


def test_the_right_token_is_200(fuzz: Fuzz) -> None:
    response = fuzz.send("bearer token", "GET", "http://testserver/notes/224/graph",
                         headers={"authorization": AUTH})
    assert response.status_code == 200
    check_result(response.content, 224)
