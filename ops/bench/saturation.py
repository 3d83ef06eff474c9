"""How many cache hits one ``graphrag serve`` process answers per second, against its floor.

A closed-loop load generator (``wrk``: :data:`THREADS` threads, :data:`CONNECTIONS` keep-alive
connections, each sending its next request as soon as the last is answered) reads random notes of
the run's snapshots for :data:`SECONDS` through the service's own path (``GET /notes/{id}/graph``
with the shared token: every answer a cache hit, as the HTTP section checked), then, side by side
in the same run, through the floor (ops.bench.floor_app: the same server, Redis and stored values,
nothing else). ``http_saturation_over_floor`` is the first rate over the second. Both share the
machine's cores with ``wrk`` itself, so only their ratio means anything.

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

THREADS, CONNECTIONS, SECONDS = 2, 10, 8
_RATE = re.compile(rb"Requests/sec:\s+([0-9.]+)")
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


def _rate(base_url: str, script: Path) -> float:
    """Requests per second wrk reached against ``base_url``; every answer must be a 200."""
    out = subprocess.run(["wrk", f"-t{THREADS}", f"-c{CONNECTIONS}", f"-d{SECONDS}s", "-s",
                          str(script), base_url], capture_output=True, check=True,
                         timeout=SECONDS + 60).stdout
    errors = _ERRORS.search(out)
    if errors is not None:
        raise RuntimeError(f"{errors.group(1).decode()} answers were not 200 at {base_url}")
    found = _RATE.search(out)
    if found is None:
        raise RuntimeError(f"wrk printed no rate: {out[-300:]!r}")
    return float(found.group(1))


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
        ours = _rate(svc.base_url, _script([f"/notes/{f}/graph" for f in foci], svc.token, folder))
        with _floor(bench.redis_url, keys, folder) as floor_url:
            floor = _rate(floor_url, _script([f"/k/{i}" for i in range(len(keys))], None, folder))
    say(f"saturation: graphrag serve {ours:,.0f} hits/s, the floor {floor:,.0f}/s "
        f"({ratio(ours, floor):.2f}), {CONNECTIONS} connections")
    return {"http_saturation_per_s": ours, "http_floor_per_s": floor,
            "http_saturation_over_floor": ratio(ours, floor),
            "http_saturation_connections": CONNECTIONS}
