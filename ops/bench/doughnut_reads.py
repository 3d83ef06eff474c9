"""The read Doughnut's clients make, in process: ``GET /api/notes/{id}/graph`` as one of its users.

Doughnut's MCP server reads a note's context with a user's token and a tokenLimit the agent picks,
so the figure that matters is not the owner's hit at the stored limit alone. On the rebuilt
snapshots of today's section, each kind of reader reads through :func:`service.doughnut_api.answer`
(the path's parsing, the token's user, the read rule, the reader), with a ``user_token`` row the
run inserts for each reading user and deletes after:

* ``owner_default``: a user-owned notebook's owner at tokenLimit 2000 (the stored result);
* ``owner_any``: the same owner at a random tokenLimit from 1 to 20,000;
* ``subscriber``, ``circle``: a subscriber of a rebuilt notebook, a member of the circle owning one,
  each at a random tokenLimit;
* ``bazaar_anonymous``: no token, a note of a bazaar notebook, a random tokenLimit.

Each kind reads every one of its notes once to warm up; then the kinds are timed side by side:
:data:`ROUNDS` rounds, in each of which every kind's reads of all its notes are made in one shuffled
order, the kinds' reads interleaved, so that whatever else the machine does meanwhile, and how
fast it runs from one moment to the next, falls on every kind alike (a kind read as a block of
its own met the machine of its block: the rows moved by more than the target's margin between
runs). Steady state is
measured: the run changes no access row, so the wiring it is given remembers access answers for
the run (``GRAPHRAG_TOKEN_CACHE_S`` = :data:`STEADY_S`), as change capture's access epoch does in
production (service.access); with webhooks only, the 5 s default makes every non-owner's verdict be
asked again every 5 s. SQL statements are counted on the
engine over the timed reads (``sql_per_read``: all kinds together, and per kind). ``ratio_p50``
is a kind's p50 over ``owner_default``'s, measured in the same run. The same kinds are then read
over HTTP at a fixed rate (ops.bench.doughnut_http), under ``<kind>.http``.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import time
from collections.abc import Iterator, Sequence
from typing import Any

from graphrag.wiki.model import Viewer, WikiNeed
from graphrag.wiki.view import WikiView
from ops.bench.doughnut_http import doughnut_http
from ops.bench.helpers import percentile, ratio, say
from service.doughnut_api import DoughnutRead, answer
from service.sessions import Viewers
from storage.database import Database, counted_statements
from storage.profiles import admin_2026
from worker.compose import Wiring

__all__ = ["KINDS", "STEADY_S", "doughnut_reads"]

KINDS = ("owner_default", "owner_any", "subscriber", "circle", "bazaar_anonymous")
DEFAULT_LIMIT, ANY_LIMITS = 2_000, (1, 20_000)
READS_PER_KIND, ROUNDS = 200, 6
#: how long the bench's wiring remembers access answers: the run's length (module docstring)
STEADY_S = 3_600
#: (focus, the user whose token reads it or None, fixed tokenLimit or None for a random one)
Call = tuple[int, int | None, int | None]


def _owners(wiring: Wiring, foci: Sequence[int]) -> dict[int, tuple[int, Viewer]]:
    """Focus -> (its notebook, the notebook's owner)."""
    view = WikiView()
    with wiring.source.batch() as load:
        load(view, WikiNeed.of(notes=foci))
    books = {f: n.notebook_id for f in foci if (n := view.note(f)) is not None and n.notebook_id}
    with wiring.source.batch() as load:
        load(view, WikiNeed.of(notebooks=set(books.values())))
    return {f: (b, nb.owner) for f, b in books.items() if (nb := view.notebook(b)) is not None}


def _calls(wiring: Wiring, engine: Database, foci: Sequence[int]) -> dict[str, list[Call]]:
    owners = _owners(wiring, foci)
    books = sorted({b for b, _ in owners.values()})
    by_user = [(f, o.user_id) for f, (_, o) in owners.items() if o.user_id is not None]
    calls: dict[str, list[Call]] = {
        "owner_default": [(f, u, DEFAULT_LIMIT) for f, u in by_user[:READS_PER_KIND]],
        "owner_any": [(f, u, None) for f, u in by_user[:READS_PER_KIND]]}
    for kind, (user, book) in admin_2026.other_readers(engine, books).items():
        mine = [f for f, (b, _) in owners.items() if b == book][:READS_PER_KIND]
        calls["circle" if kind.startswith("circle") else kind] = [(f, user, None) for f in mine]
    bazaar = admin_2026.bazaar_notebooks(engine, books)
    anonymous: list[Call] = [(f, None, None) for f, (b, _) in owners.items() if b in bazaar]
    calls["bazaar_anonymous"] = anonymous[:READS_PER_KIND]
    return {k: v for k, v in calls.items() if v}


@contextlib.contextmanager
def _tokens(engine: Database, users: set[int]) -> Iterator[dict[int, str]]:
    """A ``user_token`` row per user for the run's length."""
    tokens = {u: f"bench-{secrets.token_hex(16)}" for u in sorted(users)}
    admin_2026.insert_rows(engine, {"user_token": [
        {"user_id": user, "token": token, "label": "bench"} for user, token in tokens.items()]})
    try:
        yield tokens
    finally:
        admin_2026.delete_tokens(engine, list(tokens.values()))


def _timed(read: Any, calls: Sequence[Call], tokens: dict[int, str],
           rng: random.Random) -> list[float]:
    out = []
    for focus, user, fixed in calls:
        limit = fixed if fixed is not None else rng.randint(*ANY_LIMITS)
        request = DoughnutRead(str(focus), str(limit), None if user is None else tokens[user], "json")
        started = time.perf_counter_ns()
        read(request)
        out.append((time.perf_counter_ns() - started) / 1000)
    return out


def doughnut_reads(bench: Any, wiring: Wiring, engine: Database,
                   foci: Sequence[int]) -> dict[str, Any]:
    """The figures of the module docstring, keyed by kind (absent kinds left out)."""
    calls, rng = _calls(wiring, engine, foci), random.Random(bench.seed + 11)
    reader, viewers = wiring.reader(), Viewers(wiring.token_book())
    with _tokens(engine, {u for cs in calls.values() for _, u, _ in cs if u is not None}) as tokens:
        out, statements = _side_by_side(lambda request: answer(reader, viewers, request), calls,
                                        tokens, rng, engine)
        over_http = doughnut_http(
            bench, wiring.settings.database_url, engine, wiring.settings.redis_prefix, STEADY_S,
            {kind: [(f, None if u is None else tokens[u], fixed) for f, u, fixed in kind_calls]
             for kind, kind_calls in calls.items()})
    _ratios(out, "in process")
    _ratios(over_http, "over HTTP")
    for kind, row in over_http.items():
        out[kind]["http"] = row
    out["sql_per_read"] = ratio(statements, sum(r["reads"] for r in out.values()))
    return out


def _side_by_side(read: Any, calls: dict[str, list[Call]], tokens: dict[int, str],
                  rng: random.Random, engine: Database) -> tuple[dict[str, Any], int]:
    """Every kind warmed up, then timed in :data:`ROUNDS` rounds of all the kinds' reads in one
    shuffled order: the rows by kind, and the SQL statements of all the timed reads."""
    for kind_calls in calls.values():
        _timed(read, kind_calls, tokens, rng)
    us: dict[str, list[float]] = {kind: [] for kind in calls}
    sql = dict.fromkeys(calls, 0)
    mixed = [(kind, call) for kind, kind_calls in calls.items() for call in kind_calls]
    for _ in range(ROUNDS):
        with counted_statements(engine) as counted:
            for kind, call in rng.sample(mixed, len(mixed)):
                before = counted.statements
                us[kind] += _timed(read, [call], tokens, rng)
                sql[kind] += counted.statements - before
    return ({kind: {"reads": len(t), "p50_us": percentile(t, .5), "p99_us": percentile(t, .99),
                    "sql_per_read": ratio(sql[kind], len(t))} for kind, t in us.items()},
            sum(sql.values()))


def _ratios(rows: dict[str, Any], how: str) -> None:
    """Each kind's p50 over ``owner_default``'s, said."""
    base = rows.get("owner_default", {}).get("p50_us", 0.0)
    for kind, row in rows.items():
        row["ratio_p50"] = ratio(row["p50_us"], base)
        say(f"Doughnut's read {how}, {kind}: p50 {row['p50_us']:.0f} µs ({row['ratio_p50']:.2f}× the "
            f"owner's default), p99 {row['p99_us']:.0f} µs, {row['sql_per_read']:.2f} SQL per read")
