"""How many cache hits one ``graphrag serve`` process answers per second, against its floor.

A closed-loop load generator (``wrk``: :data:`THREADS` threads, :data:`CONNECTIONS` keep-alive
connections, each sending its next request as soon as the last is answered) reads random notes of
the run's snapshots through the service's own path (``GET /notes/{id}/graph`` with the shared
token: every answer a cache hit, as the HTTP section checked) and through the floor
(ops.bench.floor_app: the same server, Redis and stored values, nothing else), side by side:
:data:`ROUNDS` rounds of :data:`SLICE_S` seconds on each in turn, both servers up throughout, so
that what else the machine does meanwhile (the workers' start, a neighbour) falls on both alike.
Each rate is its rounds' requests over their seconds; ``http_saturation_over_floor`` is the first
over the second. Both share the machine's cores with ``wrk`` itself, so only their ratio means
anything.

Without ``wrk`` on the machine (Debian: ``apt-get install wrk``) the figures are None and the run
says so.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ops.bench.helpers import free_port, listening, ratio, say, wait_for
from ops.bench.plan import Bench
from ops.bench.services import Services, stop_group

__all__ = ["saturation"]

THREADS, CONNECTIONS, ROUNDS, SLICE_S = 2, 10, 4, 2
_COUNT = re.compile(rb"(\d+) requests in ([0-9.]+)(us|ms|s|m),")
_UNITS_S = {b"us": 1e-6, b"ms": 1e-3, b"s": 1.0, b"m": 60.0}
_ERRORS = re.compile(rb"Non-2xx or 3xx responses:\s+(\d+)")


def _script(paths: Sequence[str], token: str | None, folder: Path) -> Path:
    """A wrk script that sends GET requests to random ``paths``."""
    listed = ",".join(f'"{p}"' for p in paths)
    auth = f'{{["Authorization"]="Bearer {token}"}}' if token else "{}"
    script = folder / f"paths-{len(paths)}-{bool(token)}.lua"
    script.write_text(f"local paths = {{{listed}}}\nmath.randomseed(7)\n"
                      "request = function()\n"
                      f"  return wrk.format(\"GET\", paths[math.random(1, #paths)], {auth})\n"
                      "end\n")
    return script


def _count(base_url: str, script: Path) -> tuple[int, float]:
    """(requests answered, seconds) of one round of wrk against ``base_url``; every answer must
    be a 200."""
    out = subprocess.run(["wrk", f"-t{THREADS}", f"-c{CONNECTIONS}", f"-d{SLICE_S}s", "-s",
                          str(script), base_url], capture_output=True, check=True,
                         timeout=SLICE_S + 60).stdout
    errors = _ERRORS.search(out)
    if errors is not None:
        raise RuntimeError(f"{errors.group(1).decode()} answers were not 200 at {base_url}")
    found = _COUNT.search(out)
    if found is None:
        raise RuntimeError(f"wrk printed no count: {out[-300:]!r}")
    return int(found.group(1)), float(found.group(2)) * _UNITS_S[found.group(3)]


@contextlib.contextmanager
def _floor(redis_url: str, keys: Sequence[str], folder: Path) -> Iterator[str]:
    """The floor app under uvicorn on a free port, serving ``keys``."""
    listed = folder / "keys.txt"
    listed.write_text("\n".join(keys) + "\n")
    port = free_port()
    env = {**os.environ, "GRAPHRAG_BENCH_FLOOR_KEYS": str(listed),
           "GRAPHRAG_BENCH_FLOOR_REDIS": redis_url}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "ops.bench.floor_app:app",
                             "--port", str(port), "--http", "httptools", "--no-access-log",
                             "--log-level", "warning"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_for(lambda: listening(port), 30):
            raise RuntimeError("the floor app did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_group(proc)


def saturation(bench: Bench, svc: Services, foci: Sequence[int],
               keys: Sequence[str]) -> dict[str, Any]:
    """The rates and their ratio (module docstring); ``keys[i]`` holds the snapshot ``foci[i]``'s
    read is answered from."""
    if shutil.which("wrk") is None:
        say("saturation: wrk is not installed (apt-get install wrk): not measured")
        return {"http_saturation_per_s": None, "http_floor_per_s": None,
                "http_saturation_over_floor": None}
    with tempfile.TemporaryDirectory(prefix="graphrag-bench-wrk-") as tmp:
        folder = Path(tmp)
        ours_script = _script([f"/notes/{f}/graph" for f in foci], svc.token, folder)
        floor_script = _script([f"/k/{i}" for i in range(len(keys))], None, folder)
        with _floor(bench.redis_url, keys, folder) as floor_url:
            counted = [(_count(svc.base_url, ours_script), _count(floor_url, floor_script))
                       for _ in range(ROUNDS)]
    ours, floor = (ratio(sum(n for n, _ in side), sum(s for _, s in side))  # requests/s
                   for side in zip(*counted, strict=True))
    say(f"saturation: graphrag serve {ours:,.0f} hits/s, the floor {floor:,.0f}/s "
        f"({ratio(ours, floor):.2f}), {CONNECTIONS} connections")
    return {"http_saturation_per_s": ours, "http_floor_per_s": floor,
            "http_saturation_over_floor": ratio(ours, floor),
            "http_saturation_connections": CONNECTIONS}
