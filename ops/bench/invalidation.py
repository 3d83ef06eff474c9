"""Invalidation latency: a title edit in the database, a signed webhook, a fresh snapshot.

Each measured edit changes the title of a note that a rebuilt wavefront snapshot shows among its
first related notes (its parent, a child, ...), posts one signed Standard Webhooks delivery to
``graphrag serve`` and waits until *that focus's* snapshot in Redis contains the new title: the
change must travel through the reverse index (``dep:``), the dirty set, the drain and the rebuild.
Edits go one after another; the first ``WARMUP_EDITS`` (worker processes building their runtime) are
reported apart. The burst posts ``burst_edits`` edits over ``burst_notes`` notes, one webhook per
round, and waits until the dirty set is empty, the broker idle and a sample of the notes'
snapshots shows their last titles.

Every title changed is remembered first in ``Graph.originals`` and written back by
:func:`restore_titles` (the run calls it in a ``finally``), so the bench database stays reusable.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import orjson
from standardwebhooks.webhooks import Webhook

from ops.bench.graph import Graph, wiring_for
from ops.bench.helpers import percentile, rounded, say, wait_for
from ops.bench.plan import EDIT_MARK, WARMUP_EDITS, Bench, BenchError
from ops.bench.reader import http_section
from ops.bench.services import Services, broker_idle, services
from ops.bench.stages import (
    broker_round_trip_ms,
    floor_figures,
    rebuild_ms,
    slowest_edits,
    stage_watch,
    typical_first,
)
from service.envelope import SnapshotKey
from storage.profiles import admin_2025
from storage.redis.cache import RedisCache
from worker.compose import Wiring

__all__ = ["broker_section", "burst", "edit_floor", "edit_pairs", "edit_plan", "quiet",
           "reader_edits", "restore_titles", "services_section", "set_titles", "single_edits"]


def set_titles(graph: Graph, titles: dict[int, str]) -> None:
    """Write the titles, remembering the originals first (restored by :func:`restore_titles`)."""
    new = [i for i in titles if i not in graph.originals]
    if new:
        graph.originals.update(admin_2025.titles_of(graph.engine, new))
    admin_2025.set_titles(graph.engine, titles)


def restore_titles(graph: Graph) -> None:
    if graph.originals:
        admin_2025.set_titles(graph.engine, graph.originals)
        say(f"restored the titles of {len(graph.originals)} edited notes")
        graph.originals.clear()


def post_events(http: httpx.Client, secret: str, note_ids: Sequence[int]) -> None:
    """One signed ``note.updated`` delivery for ``note_ids``; anything but 202 stops the run."""
    now = dt.datetime.now(dt.UTC)
    events = [{"type": "note.updated", "noteId": i, "occurredAt": now.isoformat()} for i in note_ids]
    body = orjson.dumps({"events": events})
    msg_id = f"msg_{uuid.uuid4().hex}"
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(int(now.timestamp())),
               "webhook-signature": Webhook(secret).sign(msg_id, now, body.decode()),
               "content-type": "application/json"}
    reply = http.post("/webhooks/note-events", content=body, headers=headers)
    if reply.status_code != 202:
        raise BenchError(f"webhook answered {reply.status_code}: {reply.text[:200]}")


def _wavefront(cache: RedisCache, focus: int) -> bytes:
    return cache.read(SnapshotKey(focus, "wavefront", 0)) or b""


def _shown_related(raw: bytes) -> list[int]:
    if not raw:
        return []
    related = orjson.loads(raw)["result"]["relatedNotes"]
    return [int(r["uri"].removeprefix("/n")) for r in related[:3]]


def edit_pairs(bench: Bench, graph: Graph, foci: list[int], count: int) -> list[tuple[int, int]]:
    """(note to edit, focus to watch): a non-link note among the first related notes of a
    rebuilt focus (its parent, child, ...); the change reaches that focus through ``dep:``."""
    cache = wiring_for(bench, graph, "main").cache
    raws = [_wavefront(cache, f) for f in foci]
    plain = admin_2025.live_plain_ids(graph.engine, foci)
    rng, pairs, used = random.Random(bench.seed + 4), [], set()
    for focus, raw in rng.sample(list(zip(foci, raws, strict=True)), len(foci)):
        shown = [n for n in _shown_related(raw) if n in plain and n not in used]
        if shown and focus not in used:
            pairs.append((shown[0], focus))
            used |= {shown[0], focus}
        if len(pairs) == count:
            break
    return pairs


def _shows(cache: RedisCache, focus: int, marker: bytes) -> Callable[[], bool]:
    return lambda: marker in _wavefront(cache, focus)


def _served(http: httpx.Client, svc: Services, focus: int, marker: bytes) -> Callable[[], bool]:
    """Whether ``graphrag serve`` answers a read of ``focus`` with ``marker`` in it."""
    auth = {"Authorization": f"Bearer {svc.token}"}
    return lambda: marker in http.get(f"/notes/{focus}/graph", params={"seed": 0}, headers=auth).content


def edit_latencies(bench: Bench, graph: Graph, svc: Services, pairs: Sequence[tuple[int, int]],
                   http: httpx.Client, tag: str, *, webhook: bool = True,
                   reader: bool = False, commits_ms: list[float] | None = None,
                   ) -> tuple[list[float], int]:
    """(ms from the commit (then its webhook) to a snapshot showing the new title, timeouts), one
    edit after another; ``webhook=False`` sends none (change capture announces the commit);
    ``reader=True`` waits for ``graphrag serve`` to answer with the new title instead. The time
    starts once the commit returned: writing the title is the database's time, not the service's
    (10–25 ms here, one write in ~50 stalling for 200 ms); ``commits_ms`` gets each write's own."""
    cache, latencies, timeouts = wiring_for(bench, graph, "main").cache, [], 0
    for i, (edited, watch) in enumerate(pairs):
        title = f"{EDIT_MARK} {bench.run} {tag}{i}"
        shows = (_served(http, svc, watch, title.encode()) if reader
                 else _shows(cache, watch, title.encode()))
        writing = time.perf_counter()
        set_titles(graph, {edited: title})
        started = time.perf_counter()
        if commits_ms is not None:
            commits_ms.append((started - writing) * 1000)
        if webhook:
            post_events(http, svc.secret, [edited])
        if wait_for(shows, bench.plan.edit_timeout_s):
            latencies.append((time.perf_counter() - started) * 1000)
        else:
            timeouts += 1
    return latencies, timeouts


def single_edits(bench: Bench, graph: Graph, svc: Services, pairs: list[tuple[int, int]],
                 http: httpx.Client, tag: str = "") -> dict[str, Any]:
    """The first ``WARMUP_EDITS`` (worker processes building their runtime) are reported apart.
    ``tag`` keeps a section's titles apart from an earlier section's, whose snapshots may still
    show them (restoring the titles in the database sends no event). With the figures, where the
    measured edits' time went and the topology's floor (ops.bench.stages). The first edit is one
    of typical width (ops.bench.stages.typical_first)."""
    wiring = wiring_for(bench, graph, "main")
    pairs = typical_first(wiring, pairs, len(pairs))
    urls = [svc.worker_metrics_url, f"{svc.base_url}/metrics"]
    with stage_watch(urls) as first:  # (the first edit alone, until all its foci are rebuilt)
        cold, _ = edit_latencies(bench, graph, svc, pairs[:1], http, f"{tag}w")
        quiet(svc, wiring)
    first_stages = first.figures()
    cold += edit_latencies(bench, graph, svc, pairs[1:WARMUP_EDITS], http, f"{tag}x")[0]
    commits: list[float] = []
    with stage_watch(urls) as watch:
        latencies, timeouts = edit_latencies(bench, graph, svc, pairs[WARMUP_EDITS:], http,
                                             f"{tag}s", commits_ms=commits)
        quiet(svc, wiring)
    bench.samples["invalidation_ms"] = latencies
    say(f"single edits: p50 {percentile(latencies, .5):.0f} ms, p95 {percentile(latencies, .95):.0f} "
        f"ms, {timeouts} timeouts of {len(latencies) + timeouts} (warm-up: {rounded(cold)} ms)")
    single = {"p50_ms": percentile(latencies, .5), "p95_ms": percentile(latencies, .95),
              "max_ms": max(latencies, default=math.nan), "edits": len(latencies) + timeouts,
              "timeouts": timeouts, "samples_ms": rounded(latencies), "warmup_ms": rounded(cold),
              "commit_p50_ms": percentile(commits, .5), "commit_max_ms": max(commits, default=math.nan),
              "commit_samples_ms": rounded(commits)}
    if not timeouts:
        single["slowest_edits"] = slowest_edits(wiring, pairs[WARMUP_EDITS - 1:], latencies)
    say("the first edit's stages (sum ms / count): " + ", ".join(
        f"{s} {v['sum_ms']:.0f}/{v['count']:.0f}" for s, v in first_stages.items()))
    return {**single, "first_edit_stages": first_stages,
            **edit_floor(bench, graph, svc, [e for e, _ in pairs[WARMUP_EDITS:]], single,
                         watch.figures(), first_edited=pairs[0][0])}


def edit_floor(bench: Bench, graph: Graph, svc: Services, edited: list[int],
               single: dict[str, Any], stages: dict[str, dict[str, float]],
               first_edited: int | None = None) -> dict[str, Any]:
    """The stages and the floor keys of ops.bench.stages for a topology's single edits, with the
    first edit's own floor when ``first_edited`` names the note it edited, and the drains' batch
    and budget the workers ran with (the run's environment may set them)."""
    wiring = wiring_for(bench, graph, "main")
    rebuilt = rebuild_ms(wiring, edited[:FLOOR_EDITS])
    first = None if first_edited is None else rebuild_ms(wiring, [first_edited])[0]
    trip = broker_round_trip_ms(svc.env["CELERY_BROKER_URL"])
    drains = {"drain_batch": wiring.settings.drain_batch,
              "drain_budget_ms": wiring.settings.drain_budget_ms}
    return {**floor_figures(single, rebuilt, trip, wiring.settings.debounce_ms, stages, first),
            **drains}


def reader_edits(bench: Bench, graph: Graph, svc: Services, pairs: list[tuple[int, int]],
                 http: httpx.Client) -> dict[str, Any]:
    """Single edits again (other notes), each until the HTTP reader answers with the new title:
    what a Doughnut user sees. The webhook outdates the snapshots showing the edited note before it
    answers and the reader computes an outdated snapshot instead of serving it, so this is the
    webhook's path, not the drain's (docs/redis.md, "Freshness")."""
    latencies, timeouts = edit_latencies(bench, graph, svc, pairs, http, "v", reader=True)
    say(f"single edits, seen through the reader: p50 {percentile(latencies, .5):.0f} ms, p95 "
        f"{percentile(latencies, .95):.0f} ms, {timeouts} timeouts of {len(latencies) + timeouts}")
    return {"reader_p50_ms": percentile(latencies, .5), "reader_p95_ms": percentile(latencies, .95),
            "reader_edits": len(latencies) + timeouts, "reader_timeouts": timeouts,
            "reader_samples_ms": rounded(latencies)}


#: edits whose foci are rebuilt in process for the floor (each a few ms to a few tens)
FLOOR_EDITS = 20


def _settled(wiring: Wiring, svc: Services, wanted: dict[int, bytes], peak: list[int]) -> bool:
    """The sample shows its last titles, the dirty set is empty and the broker idle (records the
    dirty set's peak size in ``peak[0]``)."""
    dirty = wiring.dirty.size()
    peak[0] = max(peak[0], dirty)
    shown = all(title in _wavefront(wiring.cache, n) for n, title in wanted.items())
    return shown and dirty == 0 and broker_idle(svc)


def burst(bench: Bench, graph: Graph, svc: Services, notes: list[int],
          http: httpx.Client, tag: str = "") -> dict[str, Any]:
    """``burst_edits`` title edits over ``notes``, one webhook per round of edits; the time from the
    first edit until everything settled (see :func:`_settled`)."""
    rounds = math.ceil(bench.plan.burst_edits / len(notes))
    wiring = wiring_for(bench, graph, "main")
    started = time.perf_counter()
    for r in range(rounds):
        titles = {n: f"{EDIT_MARK} {bench.run} {tag}b{r} {n}" for n in notes}
        set_titles(graph, titles)
        post_events(http, svc.secret, notes)
    sample = random.Random(bench.seed + 5).sample(notes, min(20, len(notes)))
    wanted, peak = {n: titles[n].encode() for n in sample}, [0]
    ok = wait_for(lambda: _settled(wiring, svc, wanted, peak), bench.plan.burst_timeout_s, 0.05)
    seconds = time.perf_counter() - started
    say(f"burst of {rounds * len(notes)} edits over {len(notes)} notes: "
        f"{'settled' if ok else 'NOT settled'} after {seconds:.1f} s (dirty peak {peak[0]})")
    return {"burst_1000_s": seconds if ok else math.nan, "burst_settled": ok,
            "burst_edits": rounds * len(notes), "burst_notes": len(notes), "burst_webhooks": rounds,
            "burst_dirty_peak": peak[0], "burst_timeout_s": bench.plan.burst_timeout_s}


def edit_plan(bench: Bench, graph: Graph, foci: list[int], count: int,
              seed: int) -> tuple[list[tuple[int, int]], list[int]]:
    """(``count`` edit pairs, the burst's notes): the pairs as :func:`edit_pairs` finds them, and
    ``burst_notes`` other plain live notes, sampled with ``bench.seed + seed`` (each section its
    own, so no two sections edit the same burst)."""
    pairs = edit_pairs(bench, graph, foci, count)
    used = {n for pair in pairs for n in pair}
    plain = sorted(admin_2025.live_plain_ids(graph.engine, foci) - used)
    notes = random.Random(bench.seed + seed).sample(plain, min(bench.plan.burst_notes, len(plain)))
    return pairs, notes


def quiet(svc: Services, wiring: Wiring) -> bool:
    """Wait (60 s at most) until the broker is idle and the dirty set empty: the next measurement
    starts with no work of the last one left."""
    return wait_for(lambda: broker_idle(svc) and wiring.dirty.size() == 0, 60, 0.05)


def services_section(bench: Bench, graph: Graph,
                     foci: list[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(HTTP reader figures, invalidation figures), with one worker and one HTTP server."""
    measured = WARMUP_EDITS + bench.plan.edits
    pairs, notes = edit_plan(bench, graph, foci, measured + bench.plan.edits, 6)
    wiring = wiring_for(bench, graph, "main")
    with services(bench, graph) as svc, httpx.Client(base_url=svc.base_url, timeout=10) as http:
        reading = http_section(bench, svc, foci)
        single = single_edits(bench, graph, svc, pairs[:measured], http)
        quiet(svc, wiring)
        seen = reader_edits(bench, graph, svc, pairs[measured:], http)
        quiet(svc, wiring)
        return reading, {**single, **seen, **burst(bench, graph, svc, notes, http)}


def broker_section(bench: Bench, graph: Graph, foci: list[int], amqp_url: str) -> dict[str, Any]:
    """The single-edit and burst figures again with RabbitMQ as the broker (same graph, worker and
    edits as the services section, a private vhost)."""
    pairs, notes = edit_plan(bench, graph, foci, WARMUP_EDITS + bench.plan.edits, 7)
    wiring = wiring_for(bench, graph, "main")
    with services(bench, graph, amqp_url) as svc, \
            httpx.Client(base_url=svc.base_url, timeout=10) as http:
        single = single_edits(bench, graph, svc, pairs, http, "r")
        quiet(svc, wiring)
        return {**single, **burst(bench, graph, svc, notes, http, "r"), "broker": "rabbitmq"}
