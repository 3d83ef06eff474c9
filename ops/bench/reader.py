"""Reader latency: in-process hits against a raw GET of the same keys, and HTTP hits.

In process, :meth:`service.reader.SnapshotReader.get` (from :meth:`worker.compose.Wiring.reader`)
is timed on fresh hits over the snapshots the wavefront rebuild wrote, next to
:func:`storage.redis.probe.get_latencies_us` (a bare ``GET`` + ``orjson.loads``) of the same keys on
the same client, in alternating blocks of every snapshot in a fresh shuffled order, so both see the
same keys, the same connection and the same moments of machine load. A read served from anywhere
but the cache stops the run: the figure would not be a hit's. A third block reads through a reader
with the change-feed bound off (service.feed): the bound's check is an in-memory verdict refreshed in
the background, so the two should differ by noise only (``feed_bound_ratio_p50``).

Over HTTP, ``GET /notes/{id}/graph`` with the bearer token against ``graphrag serve`` on loopback,
at a fixed request rate on one keep-alive connection, timed from send to full body; every other
request is conditional and answered ``304`` (worker.http.conditional).
"""

from __future__ import annotations

import contextlib
import math
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx

from ops.bench.graph import Graph, wiring_for
from ops.bench.helpers import percentile, ratio, say
from ops.bench.plan import Bench, BenchError
from ops.bench.saturation import saturation
from ops.bench.services import Services
from storage.redis.keys import Keys
from storage.redis.positions import RedisFeedHeartbeat
from storage.redis.probe import get_latencies_us
from worker.compose import Wiring

__all__ = ["http_section", "reader_section", "time_reader"]


def time_reader(get: Callable[[int], Any], foci: Sequence[int]) -> list[float]:
    """Microseconds of ``get`` for each focus, in order; a read not served from the cache stops
    the run (the figure would not be a hit's)."""
    clock, out = time.perf_counter_ns, []
    for focus in foci:
        started = clock()
        served = get(focus)
        out.append((clock() - started) / 1000)
        if served.source != "cache":
            raise BenchError(f"note {focus} was served from {served.source}, not from the cache")
    return out


def reader_section(bench: Bench, graph: Graph, foci: list[int]) -> dict[str, Any]:
    """Reader hits and raw GET + decode of the same keys, alternating blocks of ``len(foci)``; and
    the same hits through a reader whose change-feed bound is off (``GRAPHRAG_MAX_FEED_LAG_S=0``)
    while the bounded one (the default, 10 s) trusts a heartbeat kept fresh meanwhile."""
    wiring = wiring_for(bench, graph, "main")
    unbounded = Wiring(wiring.settings.model_copy(update={"max_feed_lag_s": 0}),
                       redis_client=bench.client)
    unbounded.source, unbounded.service = wiring.source, wiring.service
    reader, keys = wiring.reader(), Keys(wiring.settings.redis_prefix)
    free_reader = unbounded.reader()
    rng, hits, raws, free = random.Random(bench.seed + 2), [], [], []
    order = list(foci)
    with _beating(RedisFeedHeartbeat(bench.client, keys)):
        for _ in range(math.ceil(bench.plan.reads / len(foci))):
            rng.shuffle(order)
            hits += time_reader(reader.get, order)
            free += time_reader(free_reader.get, order)
            raws += get_latencies_us(bench.client, [keys.snapshot(f, "wavefront", 0) for f in order])
    bench.samples.update(hit_us=hits, raw_us=raws)
    say(f"reader: hit p50 {percentile(hits, .5):.0f} µs ({percentile(free, .5):.0f} without the "
        f"feed bound), raw GET p50 {percentile(raws, .5):.0f} µs")
    return {"hit_p50_us": percentile(hits, .5), "hit_p99_us": percentile(hits, .99),
            "raw_get_p50_us": percentile(raws, .5), "raw_get_p99_us": percentile(raws, .99),
            "ratio_p50": ratio(percentile(hits, .5), percentile(raws, .5)), "reads": len(hits),
            "snapshots": len(foci), "unbounded_hit_p50_us": percentile(free, .5),
            "feed_bound_ratio_p50": ratio(percentile(hits, .5), percentile(free, .5))}


@contextlib.contextmanager
def _beating(heartbeat: RedisFeedHeartbeat) -> Iterator[None]:
    """A change feed's heartbeat, current every half second while the block runs; forgotten after."""
    done = threading.Event()

    def beat() -> None:
        while True:
            heartbeat.beat(behind_ms=0)
            if done.wait(0.5):
                return

    thread = threading.Thread(target=beat, name="bench-feed-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        heartbeat.forget()


def http_section(bench: Bench, svc: Services, foci: list[int]) -> dict[str, Any]:
    """GET hits at a fixed rate on one keep-alive connection; latency from send to full body.
    Every other request is conditional (``If-None-Match`` with the tag the focus answered in the
    warm-up): nothing is edited meanwhile, so each must be a ``304`` with no body."""
    plan, rng = bench.plan, random.Random(bench.seed + 3)
    targets = [rng.choice(foci) for _ in range(int(plan.http_rate * plan.http_seconds))]
    latencies: dict[bool, list[float]] = {False: [], True: []}
    late, wrong, unconfirmed = 0, 0, 0
    with httpx.Client(base_url=svc.base_url, headers={"Authorization": f"Bearer {svc.token}"}) as http:
        tags = {focus: http.get(f"/notes/{focus}/graph").headers.get("etag", "")
                for focus in sorted(set(targets))}
        start = time.perf_counter() + 0.05
        for i, focus in enumerate(targets):
            due, conditional = start + i / plan.http_rate, i % 2 == 1
            time.sleep(max(0.0, due - time.perf_counter()))
            sent = time.perf_counter()
            reply = http.get(f"/notes/{focus}/graph",
                             headers={"If-None-Match": tags[focus]} if conditional else None)
            latencies[conditional].append((time.perf_counter() - sent) * 1e6)
            late += sent - due > 0.001
            wrong += reply.headers.get("x-graphrag-source") != "cache"
            unconfirmed += reply.status_code != (304 if conditional else 200)
        achieved = len(targets) / (time.perf_counter() - start)
    hits, confirmed = latencies[False], latencies[True]
    bench.samples.update(http_us=hits, http_304_us=confirmed)
    say(f"HTTP: p50 {percentile(hits, .5):.0f} µs, p99 {percentile(hits, .99):.0f} µs, 304 p50 "
        f"{percentile(confirmed, .5):.0f} µs at {achieved:.0f} req/s")
    distinct = sorted(set(targets))
    keys = [Keys(svc.prefix).snapshot(f, "wavefront", 0) for f in distinct]
    return {**saturation(bench, svc, distinct, keys),
            "http_hit_p50_us": percentile(hits, .5), "http_hit_p99_us": percentile(hits, .99),
            "http_304_p50_us": percentile(confirmed, .5),
            "http_304_p99_us": percentile(confirmed, .99),
            "http_rate_per_s": plan.http_rate, "http_achieved_per_s": achieved,
            "http_requests": len(targets), "http_late": late, "http_not_cache_hits": wrong,
            "http_not_as_expected": unconfirmed}
