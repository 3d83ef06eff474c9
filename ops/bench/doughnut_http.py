"""The read Doughnut's clients make, over HTTP at a fixed rate: ``GET /api/notes/{id}/graph``.

One ``graphrag serve`` on today's snapshots with Doughnut's users (``GRAPHRAG_READER_AUTH=doughnut``,
access answers kept for the run as in ops.bench.doughnut_reads) answers each kind of reader of that
module. Every kind's notes are read once to warm up (one GET each, in order, at the kind's
tokenLimit, or for a kind at random limits at :data:`WARM_ANY_LIMIT`, a replay: each trace is then
parsed and kept as the timed reads need it; warmed at the stored limit instead, every note's first
timed read paid the parse, a tenth of the timed reads); then the kinds are
timed side by side: :data:`SLICES` rounds, each giving every kind in turn :data:`SLICE_S` seconds
of ``wrk``, so that whatever else the machine does during the run (a purge of the database, a
neighbour's load) falls on every kind alike and the ratios to the owner's default compare like with
like. In a slice ``wrk`` sends about :data:`RATE_PER_S` requests a second from :data:`CONNECTIONS`
keep-alive connections (each waits a random 0 to ``2 × CONNECTIONS / RATE_PER_S`` seconds after an
answer, so that the connections do not send in step: a paced rate, not a saturation; it falls short
of the rate by what the answers take), each request a random note of the kind with that kind's
token and tokenLimit (2,000 for ``owner_default``, else random from 1 to 20,000).

Per kind: p50 and p99 latency over its slices (each slice's latency distribution as its 100
percentiles, pooled by the slice's request count: exact to a percentile), the rate reached, and SQL
statements per read counted on the engine (``Com_select`` of MariaDB's global status over the
kind's slices: the server's own count, so it includes any other client's; the bench runs none
meanwhile), and ``sources``: how the server's reader answered them (its counters of
:data:`SOURCES` over the kind's slices: fresh hits, another reader's answer proven the same or
remembered, views computed live, misses, outdated snapshots).

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
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ops.bench.helpers import free_port, listening, say, wait_for
from ops.bench.plan import Bench
from ops.bench.services import stop_group
from storage.database import Database, selects_run

__all__ = ["doughnut_http", "pooled_quantile"]

RATE_PER_S, CONNECTIONS, SLICES, SLICE_S = 300, 8, 6, 1
#: (focus, the reader's token or None, a fixed tokenLimit or None for a random one)
HttpCall = tuple[int, str | None, int | None]
#: what the script's ``done`` prints: each percentile's µs, the requests, non-2xx answers, µs taken
_LINE = re.compile(rb"^(q|n|bad|us) ([0-9.]+)$", re.MULTILINE)
#: one slice's latency distribution: its percentiles 0.5 to 99.5 (µs), each a hundredth of its reads
Slice = list[float]
#: how the server answered a kind's reads: its reader's counters (service.metrics.ReaderMetrics)
SOURCES = {"graphrag_cache_hits": "hit", "graphrag_viewer_snapshot_reads": "proven",
           "graphrag_viewer_remembered_reads": "remembered", "graphrag_viewer_live_reads": "live_view",
           "graphrag_cache_misses": "miss", "graphrag_cache_outdated": "outdated"}


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


def _script(calls: Sequence[HttpCall], folder: Path, kind: str, seed: int) -> Path:
    """A wrk script: a random call per request at the kind's limit (its own ``seed``: no slice
    repeats another's reads), paced per connection; at the end it prints the slice's 100
    percentiles (0.5 to 99.5), its requests, non-2xx answers and length (:func:`_wrk`)."""
    rows = ",".join(f'{{"/api/notes/{f}/graph?tokenLimit=", "{t or ""}", {limit or 0}}}'
                    for f, t, limit in calls)
    script = folder / f"{kind}-{seed}.lua"
    script.write_text(
        f"local calls = {{{rows}}}\nmath.randomseed({seed})\n"
        "request = function()\n"
        "  local c = calls[math.random(1, #calls)]\n"
        "  local limit = c[3] > 0 and c[3] or math.random(1, 20000)\n"
        "  local headers = {}\n"
        "  if c[2] ~= \"\" then headers[\"Authorization\"] = \"Bearer \" .. c[2] end\n"
        "  return wrk.format(\"GET\", c[1] .. limit, headers)\n"
        "end\n"
        f"delay = function() return math.random(0, {round(2 * CONNECTIONS * 1000 / RATE_PER_S)}) end\n"
        "done = function(summary, latency, requests)\n"
        "  for p = 0.5, 99.5, 1 do\n"
        "    io.write(string.format(\"q %d\\n\", latency:percentile(p)))\n"
        "  end\n"
        "  io.write(string.format(\"n %d\\nbad %d\\nus %d\\n\", summary.requests,\n"
        "           summary.errors.status, summary.duration))\n"
        "end\n")
    return script


def _wrk(base_url: str, script: Path) -> tuple[Slice, int, float]:
    """One slice: (its distribution, its requests, its seconds)."""
    out = subprocess.run(["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{SLICE_S}s", "-s", str(script),
                          base_url], capture_output=True, check=True, timeout=SLICE_S + 60).stdout
    lines = [(m.group(1), float(m.group(2))) for m in _LINE.finditer(out)]
    found = {name: value for name, value in lines if name != b"q"}
    if found.get(b"bad"):
        raise RuntimeError(f"{found[b'bad']:.0f} answers were not 200: {out[-600:]!r}")
    if not found.get(b"n") or b"us" not in found:
        raise RuntimeError(f"wrk printed no latency distribution: {out[-600:]!r}")
    return [us for name, us in lines if name == b"q"], int(found[b"n"]), found[b"us"] / 1e6


def pooled_quantile(slices: Sequence[tuple[Slice, int]], quantile: float) -> float:
    """The ``quantile`` of the slices together: each slice's percentiles weighted by its requests."""
    points = sorted((us, n / len(dist)) for dist, n in slices for us in dist)
    total, seen = sum(w for _, w in points), 0.0
    for us, weight in points:
        seen += weight
        if seen >= quantile * total - 1e-9:
            return us
    return points[-1][0] if points else 0.0


def _sources(base_url: str) -> dict[str, float]:
    """The server's reader counters of :data:`SOURCES` now."""
    text = httpx.get(f"{base_url}/metrics", timeout=30).text
    return {SOURCES[f.name]: sum(x.value for x in f.samples if x.name.endswith("_total"))
            for f in text_string_to_metric_families(text) if f.name in SOURCES}


#: the tokenLimit a kind read at random limits is warmed at: below every trace's full limit (the
#: focus cap, 1,500, is below them all), so the warm-up replays its trace as its reads will need,
#: parsed and kept, as the in-process warm-up does
WARM_ANY_LIMIT = 1


def _warm(base_url: str, calls: Sequence[HttpCall]) -> None:
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for focus, token, limit in calls:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            answer = client.get(f"/api/notes/{focus}/graph?tokenLimit={limit or WARM_ANY_LIMIT}",
                                headers=headers)
            if answer.status_code != 200:
                raise RuntimeError(f"warming note {focus}: {answer.status_code} {answer.text[:200]}")


def doughnut_http(bench: Bench, url: str, engine: Database, prefix: str, steady_s: int,
                  calls: Mapping[str, Sequence[HttpCall]]) -> dict[str, Any]:
    """Per kind: p50/p99 (µs), the rate reached, reads, SQL per read and the reader's sources
    (module docstring)."""
    if shutil.which("wrk") is None:
        say("Doughnut's reads over HTTP: wrk is not installed (apt-get install wrk): not measured")
        return {}
    kinds = {kind: _Timed() for kind in calls}
    with tempfile.TemporaryDirectory(prefix="graphrag-bench-http-") as tmp:
        folder = Path(tmp)
        with _serving(_env(bench, url, prefix, steady_s), folder / "serve.log") as base_url:
            for kind_calls in calls.values():
                _warm(base_url, kind_calls)
            counted = _Counted.now(base_url, engine)
            for seed in range(11, 11 + SLICES):
                for kind, kind_calls in calls.items():
                    dist, n, took_s = _wrk(base_url, _script(kind_calls, folder, kind, seed))
                    before, counted = counted, _Counted.now(base_url, engine)
                    kinds[kind].add(dist, n, took_s, counted.since(before))
    return {kind: timed.row() for kind, timed in kinds.items()}


@dataclass(frozen=True)
class _Counted:
    """The engine's SELECTs and the server's reader counters (:data:`SOURCES`), read at once."""

    selects: int
    sources: dict[str, float]

    @classmethod
    def now(cls, base_url: str, engine: Database) -> _Counted:
        return cls(selects_run(engine), _sources(base_url))

    def since(self, before: _Counted) -> _Counted:
        """What was counted between ``before`` and this reading."""
        return _Counted(self.selects - before.selects,
                        {k: v - before.sources.get(k, 0.0) for k, v in self.sources.items()})


@dataclass
class _Timed:
    """One kind's slices so far: their distributions, seconds, SQL and the reader's sources."""

    slices: list[tuple[Slice, int]] = field(default_factory=list)
    seconds: float = 0.0
    selects: int = 0
    sources: Counter[str] = field(default_factory=Counter)

    def add(self, dist: Slice, n: int, took_s: float, counted: _Counted) -> None:
        """One slice: its distribution, reads and seconds, and what was counted over it."""
        self.slices.append((dist, n))
        self.seconds += took_s
        self.selects += counted.selects
        self.sources.update(counted.sources)

    def row(self) -> dict[str, Any]:
        reads = sum(n for _, n in self.slices)
        return {"p50_us": pooled_quantile(self.slices, .5),
                "p99_us": pooled_quantile(self.slices, .99),
                "rate_per_s": reads / self.seconds if self.seconds else 0.0, "reads": reads,
                "sql_per_read": self.selects / max(reads, 1), "slices": len(self.slices),
                "sources": {k: int(v) for k, v in sorted(self.sources.items()) if v}}
