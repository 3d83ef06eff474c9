"""The read Doughnut's clients make, over HTTP at a fixed rate: ``GET /api/notes/{id}/graph``.

One ``graphrag serve`` on today's snapshots with Doughnut's users (``GRAPHRAG_READER_AUTH=doughnut``,
access answers kept for the run as in ops.bench.doughnut_reads) answers each kind of reader of that
module in turn. Each kind's notes are read once to warm up (one GET each, in order), then
``wrk`` sends about :data:`RATE_PER_S` requests a second for :data:`SECONDS` from
:data:`CONNECTIONS` keep-alive connections (each waits a random 0 to ``2 × CONNECTIONS /
RATE_PER_S`` seconds after an answer, so that the connections do not send in step: a paced rate,
not a saturation; it falls short of the rate by what the answers take), each request a random
note of the kind with that kind's token and tokenLimit (2,000 for ``owner_default``, else random
from 1 to 20,000). Per kind: wrk's p50 and p99 latency, the rate reached, and SQL statements per
read counted on the engine (``Com_select`` of MariaDB's global status over the timed run: the
server's own count, so it includes any other client's; the bench runs none meanwhile).

Without ``wrk`` (Debian: ``apt-get install wrk``) the rows are absent and the run says so.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from ops.bench.helpers import free_port, listening, say, wait_for
from ops.bench.plan import Bench
from ops.bench.services import stop_group
from storage.database import Database, selects_run

__all__ = ["doughnut_http"]

RATE_PER_S, CONNECTIONS, SECONDS = 300, 8, 6
#: (focus, the reader's token or None, a fixed tokenLimit or None for a random one)
HttpCall = tuple[int, str | None, int | None]
_UNITS = {"us": 1.0, "ms": 1_000.0, "s": 1_000_000.0}
_PERCENTILE = re.compile(rb"^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$", re.MULTILINE)
_RATE = re.compile(rb"Requests/sec:\s+([0-9.]+)")
_COUNT = re.compile(rb"(\d+) requests in")
_ERRORS = re.compile(rb"Non-2xx or 3xx responses:\s+(\d+)")


def _env(bench: Bench, url: str, prefix: str, steady_s: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHRAG_", "CELERY_"))}
    env.update(GRAPHRAG_DATABASE_URL=url, GRAPHRAG_REDIS_URL=bench.redis_url,
               GRAPHRAG_REDIS_PREFIX=prefix, GRAPHRAG_SCHEMA="doughnut-2026",
               GRAPHRAG_STRATEGIES="focus-context", GRAPHRAG_READER_AUTH="doughnut",
               GRAPHRAG_CHANGE_SOURCE="none", GRAPHRAG_TOKEN_CACHE_S=str(steady_s),
               CELERY_BROKER_URL=bench.redis_url, PYTHONUNBUFFERED="1")
    return env


@contextlib.contextmanager
def _serving(env: Mapping[str, str], log: Path) -> Iterator[str]:
    port = free_port()
    script = Path(sys.executable).with_name("graphrag")
    head = [str(script)] if script.exists() else [sys.executable, "-c",
                                                   "from worker.cli.main import main; main()"]
    with log.open("wb") as out:
        proc = subprocess.Popen([*head, "serve", "--host", "127.0.0.1", "--port", str(port)],
                                env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        if not wait_for(lambda: listening(port), 60):
            raise RuntimeError(f"graphrag serve did not start: {log.read_text()[-2000:]}")
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_group(proc)


def _script(calls: Sequence[HttpCall], folder: Path, kind: str) -> Path:
    """A wrk script: a random call per request at the kind's limit, paced per connection."""
    rows = ",".join(f'{{"/api/notes/{f}/graph?tokenLimit=", "{t or ""}", {limit or 0}}}'
                    for f, t, limit in calls)
    script = folder / f"{kind}.lua"
    script.write_text(
        f"local calls = {{{rows}}}\nmath.randomseed(11)\n"
        "request = function()\n"
        "  local c = calls[math.random(1, #calls)]\n"
        "  local limit = c[3] > 0 and c[3] or math.random(1, 20000)\n"
        "  local headers = {}\n"
        "  if c[2] ~= \"\" then headers[\"Authorization\"] = \"Bearer \" .. c[2] end\n"
        "  return wrk.format(\"GET\", c[1] .. limit, headers)\n"
        "end\n"
        f"delay = function() return math.random(0, {round(2 * CONNECTIONS * 1000 / RATE_PER_S)}) end\n")
    return script


def _wrk(base_url: str, script: Path) -> dict[str, Any]:
    out = subprocess.run(["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{SECONDS}s", "--latency", "-s",
                          str(script), base_url], capture_output=True, check=True,
                         timeout=SECONDS + 60).stdout
    errors = _ERRORS.search(out)
    if errors is not None:
        raise RuntimeError(f"{errors.group(1).decode()} answers were not 200: {out[-600:]!r}")
    found = {m.group(1): float(m.group(2)) * _UNITS[m.group(3).decode()]
             for m in _PERCENTILE.finditer(out)}
    rate, count = _RATE.search(out), _COUNT.search(out)
    if b"50" not in found or b"99" not in found or rate is None or count is None:
        raise RuntimeError(f"wrk printed no latency distribution: {out[-600:]!r}")
    return {"p50_us": found[b"50"], "p99_us": found[b"99"], "rate_per_s": float(rate.group(1)),
            "reads": int(count.group(1))}


def _warm(base_url: str, calls: Sequence[HttpCall]) -> None:
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for focus, token, limit in calls:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            answer = client.get(f"/api/notes/{focus}/graph?tokenLimit={limit or 2000}",
                                headers=headers)
            if answer.status_code != 200:
                raise RuntimeError(f"warming note {focus}: {answer.status_code} {answer.text[:200]}")


def doughnut_http(bench: Bench, url: str, engine: Database, prefix: str, steady_s: int,
                  calls: Mapping[str, Sequence[HttpCall]]) -> dict[str, Any]:
    """Per kind: p50/p99 (µs), the rate reached, reads and SQL per read (module docstring)."""
    if shutil.which("wrk") is None:
        say("Doughnut's reads over HTTP: wrk is not installed (apt-get install wrk): not measured")
        return {}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="graphrag-bench-http-") as tmp:
        folder = Path(tmp)
        with _serving(_env(bench, url, prefix, steady_s), folder / "serve.log") as base_url:
            for kind, kind_calls in calls.items():
                _warm(base_url, kind_calls)
                before = selects_run(engine)
                row = _wrk(base_url, _script(kind_calls, folder, kind))
                row["sql_per_read"] = (selects_run(engine) - before) / max(row["reads"], 1)
                out[kind] = row
    return out
