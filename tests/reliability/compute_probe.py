"""Compute contexts in a process of its own and report time, memory and the results as JSON.

Usage: ``python -m tests.reliability.compute_probe --db URL --strategy NAME --foci 1,2,3 --out FILE``

For each focus: :meth:`ContextService.compute` with the production token counter (tiktoken, offline),
the seconds it took and the result JSON, or the error's class and message. Then the same foci as
one batch (``compute_many``, as a rebuild runs them), and the process's peak RSS
(``VmHWM``), so the caller can bound memory and kill the process on a time limit.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import orjson

from graphrag import GraphRagError, Request, StrategyParams, TiktokenCounter
from service.context import ContextService
from storage.database import open_engine
from storage.encodings import load_cl100k
from tests.wiring import NoteStore

NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
TOKEN_LIMIT = 5000


def peak_rss_mb() -> float:
    """This process's own peak RSS: ``VmHWM`` of its address space.

    ``getrusage(RUSAGE_SELF).ru_maxrss`` would not do: Linux carries the parent's high-water mark
    over fork and exec, so a child of a big pytest process would report the parent's size.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--strategy", required=True)
    parser.add_argument("--foci", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    foci = [int(f) for f in args.foci.split(",")]
    tiktoken_file = os.environ.get("GRAPHRAG_TIKTOKEN_FILE") or None
    encoding = load_cl100k(Path(tiktoken_file) if tiktoken_file else None)
    counter = TiktokenCounter(encoding.encode_ordinary)
    engine = open_engine(args.db)
    service = ContextService(NoteStore(engine), counter, StrategyParams())
    report: dict[str, object] = {"single": {}, "batch": {}}
    singles: dict[str, object] = {}
    for focus in foci:
        request = Request(focus, 0, TOKEN_LIMIT, NOW_MS, TOKEN_LIMIT)
        started = time.perf_counter()
        try:
            outcome = service.compute(request, args.strategy)
            result: dict[str, object] = {"json": outcome.to_json().decode()}
        except GraphRagError as err:
            result = {"error": err.__class__.__name__, "message": str(err)}
        result["seconds"] = time.perf_counter() - started
        singles[str(focus)] = result
    report["single"] = singles
    requests = [Request(f, 0, TOKEN_LIMIT, NOW_MS, TOKEN_LIMIT) for f in foci]
    started = time.perf_counter()
    computed = service.compute_many(requests, args.strategy)
    report["batch_seconds"] = time.perf_counter() - started
    report["batch"] = {
        str(r.focus_id): ({"error": o.__class__.__name__} if isinstance(o, GraphRagError)
                          else {"json": o.to_json().decode()})
        for r, o in computed.results.items()
    }
    engine.dispose()
    report["maxrss_mb"] = peak_rss_mb()
    Path(args.out).write_bytes(orjson.dumps(report))


if __name__ == "__main__":
    main()
