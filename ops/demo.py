"""``make run``: the main job end to end on the embedded default (SQLite sample notebook).

Creates a fresh SQLite database with the bundled sample notebook in a temporary folder, computes the
context of a few interesting notes with both strategies through the batched loader, prints one result
and the compute times, and exits 0.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import orjson

from graphrag import Request
from storage.sample import SAMPLE_FOCUS_IDS, sample_notes
from worker.cli import _sample_row, parse_now
from worker.compose import build_service
from worker.settings import load_settings


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'sample.db'}"
        service = build_service(load_settings(database_url=url))
        service.store.create_table()
        service.store.insert([_sample_row(n._asdict()) for n in sample_notes()])
        print(f"sample notebook loaded into {url}", file=sys.stderr)
        now = parse_now("2026-07-01T00:00:00+00:00")
        focus = SAMPLE_FOCUS_IDS["link_note"]
        result = service.compute(Request(focus, 0, 2500, now, 5000), "wavefront").to_json()
        print(orjson.dumps(orjson.loads(result), option=orjson.OPT_INDENT_2).decode())
        for strategy in ("wavefront", "layered"):
            ids = service.store.live_ids_after(0, 10_000)
            started = time.perf_counter()
            service.compute_many([Request(i, 0, 5000, now, 5000) for i in ids], strategy)
            ms = (time.perf_counter() - started) * 1000 / len(ids)
            print(f"{strategy}: {len(ids)} contexts, {ms:.2f} ms per context (batched)",
                  file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
