"""``make run``, second part: today's Doughnut (folders and wiki links) with focus-context snapshots.

The bundled 2026 sample in a fresh SQLite database; a full rebuild of its focus-context snapshots
(the seedless order, as Doughnut's ``/graph`` and markdown endpoints use); a real Celery worker in
this process; Doughnut's own paths ``/api/notes/{id}/graph`` and ``/ai-context-markdown`` answered
from the snapshots at two tokenLimits; then a content edit that adds a wiki link, sent as a signed
webhook, and the time until the affected snapshot shows it.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from celery.contrib.testing.worker import start_worker

from storage.database import open_engine
from storage.profiles.admin_2026 import save_content
from storage.profiles.sample_2026 import SAMPLE_2026_FOCUS_IDS, load_sample_2026
from worker.celery.runtime import worker_app
from worker.compose import Wiring
from worker.http.server import build_http_app
from worker.settings import Settings

__all__ = ["run_2026"]

_AUTH: dict[str, str] = {}


def _get(http: httpx.Client, path: str) -> httpx.Response:
    answer = http.get(path, headers=_AUTH)
    answer.raise_for_status()
    return answer


def _show(http: httpx.Client, focus: int, say: Any) -> None:
    for limit in (400, 2000):
        answer = _get(http, f"/api/notes/{focus}/graph?tokenLimit={limit}")
        related = orjson.loads(answer.content)["relatedNotes"]
        say(f"GET /api/notes/{focus}/graph?tokenLimit={limit}: {len(related)} related notes, "
            f"from the {answer.headers['X-Graphrag-Source']}")
    markdown = orjson.loads(_get(http, f"/api/notes/{focus}/ai-context-markdown?tokenLimit=400")
                            .content)["markdown"]
    print("\n".join(markdown.splitlines()[:40]))
    print("...")


def _edit(settings: Settings, http: httpx.Client, note: int, target: int, signed: Any) -> float:
    """Add a wiki link from ``note`` to ``target`` as Doughnut saves it, send the event, and wait
    until ``note``'s own snapshot lists the target."""
    engine = open_engine(settings.database_url)
    title = orjson.loads(_get(http, f"/api/notes/{target}/graph?tokenLimit=10").content)[
        "focusNote"]["title"]
    before = save_content(engine, note, f"---\ntype: Note\n---\nSee [[{title}]].", [(target, title)])
    event = {"type": "note.updated", "noteId": note, "occurredAt": dt.datetime.now(dt.UTC).isoformat(),
             "before": {"linkTargets": list(before)}, "after": {"linkTargets": [target]}}
    body = orjson.dumps({"events": [event]})
    started = time.perf_counter()
    http.post("/webhooks/note-events", content=body, headers=signed(body)).raise_for_status()
    while time.perf_counter() - started < 30:
        answer = _get(http, f"/api/notes/{note}/graph?tokenLimit=2000")
        if title in answer.text and answer.headers["X-Graphrag-Source"] == "cache":
            return time.perf_counter() - started
        time.sleep(0.005)
    raise SystemExit("the edit did not reach the snapshot within 30 s")


def run_2026(settings: Settings, client: Any, folder: Path, token: str, signed: Any, say: Any,
             serving: Any) -> None:
    """The second part of the demo (the first part's helpers are passed in)."""
    _AUTH["Authorization"] = f"Bearer {token}"
    counts = load_sample_2026(open_engine(settings.database_url))
    say(f"today's Doughnut: {counts['note']} notes in {counts['folder']} folders, "
        f"{counts['note_wiki_title_cache']} resolved wiki links ({settings.database_url})")
    wiring = Wiring(settings, redis_client=client)
    report = wiring.rebuild(wiring.source.live_ids_after(0, 100_000))
    say(f"full rebuild of focus-context snapshots: {report.summary()}")
    celery = worker_app(settings, redis_client=client)
    celery.conf.broker_transport_options = {"polling_interval": 0.005}
    app = build_http_app(settings, redis_client=client, celery=celery)
    hub, linker = SAMPLE_2026_FOCUS_IDS["hub"], SAMPLE_2026_FOCUS_IDS["deep_folder_note"]
    with start_worker(celery, pool="solo", perform_ping_check=False, loglevel="WARNING",
                      queues=["realtime", "bulk"], shutdown_timeout=60), serving(app) as http:
        _show(http, hub, say)
        seconds = _edit(settings, http, linker, hub, signed)
    say(f"content edit adding a wiki link -> fresh snapshot (webhook -> worker -> Redis): "
        f"{seconds * 1000:.0f} ms")
