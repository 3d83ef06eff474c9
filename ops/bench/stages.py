"""Where an edit's time goes, and what it cannot avoid: the stages and the floor of one topology.

**Stages.** The processes an edit passes through export ``graphrag_edit_stage_seconds{stage}``
(service.metrics.EDIT_STAGES): the one it arrives at (``graphrag serve`` for a webhook, ``graphrag
cdc`` for change capture) and the worker. :class:`StageWatch` scrapes them before and after a run of
edits and estimates each stage's p50 and p95 from the buckets the run added, as Prometheus's
``histogram_quantile`` does (linear within a bucket), so a figure is as fine as the buckets around
it (a few ms below 50 ms).

**The floor.** What an edit cannot avoid on the same topology, measured in the same run:

* the same foci computed and written in process: the edit's affected foci, resolved as the worker
  resolves them (service.events), rebuilt in the drain's order (the urgent ones, then the rest);
* one publish → consume round trip on the same broker (kombu, a queue of its own);
* the configured debounce.

``floor_ms`` is the p50 over the run's edits of their own rebuild plus the p50 round trip plus the
debounce; ``p95_over_floor`` the run's commit-to-fresh p95 over it (timed from the commit's return:
writing the title is the database's time, reported apart as ``commit_p50_ms`` and
``commit_max_ms``), ``first_edit_over_floor`` the first edit after the worker started over it.
The first edit is one of typical width
(:func:`typical_first`: the median number of affected foci among the warm-up and measured edits),
so that it differs from the others by the start alone; ``first_edit_floor_ms`` is its own floor
(its own foci rebuilt in process, the round trip, the debounce) and ``first_edit_over_own_floor``
the first edit over that. ``p95_over_own_floors`` is the p95, over the first measured edits, of
each edit's time over its own floor (its own foci rebuilt in process, the round trip, the
debounce): the p95 edit is often a wide one, whose own floor is several times the p50 edit's. An
edit's time runs until its watched focus shows the edit, where its own floor rebuilds all its
foci, so for a wide edit the ratio understates; it is absent (NaN) when an edit timed out (the
samples no longer line up with the edits). ``slowest_edits`` says, for the slowest few, how
many foci the edit affected (urgent / all), the lane of the focus watched (urgent, near, wide),
and how many the edit before it affected (its wide foci may still have been draining).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
from kombu.connection import Connection
from prometheus_client.parser import text_string_to_metric_families

from ops.bench.helpers import percentile, ratio, say
from service.events import RESOLVERS, edit_lanes, sibling_radius
from service.metrics import EDIT_STAGES
from service.note_event import NoteEvent
from worker.compose import Wiring

__all__ = ["StageWatch", "broker_round_trip_ms", "floor_figures", "quantile_s", "rebuild_ms",
           "slowest_edits", "slowest_lines", "stage_watch", "typical_first"]

HISTOGRAM = "graphrag_edit_stage_seconds"
ROUND_TRIPS = 30
#: bucket upper bounds (s) -> cumulative count, per stage
Buckets = dict[str, dict[float, float]]


def _scrape(url: str) -> tuple[Buckets, dict[str, float]]:
    """Every stage's cumulative bucket counts at ``url``, and its sum of seconds (both empty when
    it cannot be read)."""
    try:
        text = httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return {}, {}
    out: Buckets = {}
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            stage_name = sample.labels.get("stage", "")
            if sample.name == f"{HISTOGRAM}_bucket":
                stage = out.setdefault(stage_name, {})
                bound = float(sample.labels["le"])
                stage[bound] = stage.get(bound, 0.0) + sample.value
            elif sample.name == f"{HISTOGRAM}_sum":
                sums[stage_name] = sums.get(stage_name, 0.0) + sample.value
    return out, sums


def _added(before: Buckets, after: Buckets) -> Buckets:
    return {stage: {le: n - before.get(stage, {}).get(le, 0.0) for le, n in counts.items()}
            for stage, counts in after.items()}


def quantile_s(counts: dict[float, float], q: float) -> float:
    """``histogram_quantile(q, ...)`` over cumulative bucket counts: linear within the bucket the
    rank falls in (from 0 in the first); NaN without samples; the last finite bound when the rank
    falls in ``+Inf``."""
    bounds = sorted(counts)
    total = counts.get(math.inf, counts[bounds[-1]] if bounds else 0.0)
    if total <= 0:
        return math.nan
    rank, lower, below = q * total, 0.0, 0.0
    for bound in bounds:
        if counts[bound] >= rank:
            if math.isinf(bound):
                return lower
            inside = counts[bound] - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, counts[bound]
    return lower


class StageWatch:
    """The stage histograms of some processes, read at :meth:`start` and at :meth:`figures`."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = list(urls)
        self.before: list[tuple[Buckets, dict[str, float]]] = [({}, {}) for _ in urls]

    def start(self) -> None:
        self.before = [_scrape(url) for url in self.urls]

    def figures(self) -> dict[str, dict[str, float]]:
        """Per stage: p50_ms, p95_ms, how many observations the run added and the sum of them
        (sum_ms), over all the processes."""
        added: Buckets = {}
        summed: dict[str, float] = {}
        for url, (before, sums_before) in zip(self.urls, self.before, strict=True):
            after, sums_after = _scrape(url)
            for stage, counts in _added(before, after).items():
                into = added.setdefault(stage, {})
                for le, n in counts.items():
                    into[le] = into.get(le, 0.0) + n
            for stage, total in sums_after.items():
                summed[stage] = summed.get(stage, 0.0) + total - sums_before.get(stage, 0.0)
        return {stage: {"p50_ms": quantile_s(added.get(stage, {}), .5) * 1000,
                        "p95_ms": quantile_s(added.get(stage, {}), .95) * 1000,
                        "count": added.get(stage, {}).get(math.inf, 0.0),
                        "sum_ms": summed.get(stage, 0.0) * 1000}
                for stage in EDIT_STAGES}


@contextmanager
def stage_watch(urls: Sequence[str]) -> Iterator[StageWatch]:
    watch = StageWatch(urls)
    watch.start()
    yield watch


def broker_round_trip_ms(broker_url: str, count: int = ROUND_TRIPS) -> float:
    """The p50 of ``count`` publish → consume round trips through a queue of the bench's own on
    the broker (deleted after)."""
    times: list[float] = []
    with Connection(broker_url) as connection:  # type: ignore[no-untyped-call]
        queue = connection.SimpleQueue(f"graphrag-bench-rtt-{uuid.uuid4().hex[:8]}")
        try:
            for i in range(count):
                started = time.perf_counter()
                queue.put({"i": i})
                queue.get(block=True, timeout=10).ack()
                times.append((time.perf_counter() - started) * 1000)
        finally:
            queue.consumer.cancel()  # (before the deletion, which RabbitMQ answers by cancelling)
            queue.queue.delete()
            queue.close()
    return percentile(times, .5)


def _affected(wiring: Wiring, note_id: int) -> tuple[set[int], set[int]]:
    """(urgent, all) foci a ``note.updated`` event of ``note_id`` affects, as the worker resolves
    them (the urgent ones are the close ones: service.events.edit_lanes)."""
    event = NoteEvent.from_json({"type": "note.updated", "noteId": note_id})
    resolve = RESOLVERS[wiring.source.model]
    return resolve([event], wiring.source, wiring.cache, sibling_radius(wiring.strategies()))


def typical_first(wiring: Wiring, pairs: Sequence[tuple[int, int]],
                  among: int) -> list[tuple[int, int]]:
    """``pairs`` (edited note, watched focus) with, first, the one of the first ``among`` whose
    edit affects the median number of foci among them: the first edit after a start then differs
    from the others by the start alone, not by its width (a hub's parent affects hundreds of foci
    where the p50 edit affects tens)."""
    head = list(pairs[:among])
    widths = [len(_affected(wiring, edited)[1]) for edited, _ in head]
    median = sorted(widths)[len(widths) // 2]
    chosen = widths.index(median)
    return [head[chosen], *head[:chosen], *head[chosen + 1:], *pairs[among:]]


def slowest_edits(wiring: Wiring, pairs: Sequence[tuple[int, int]], latencies_ms: Sequence[float],
                  count: int = 4) -> list[str]:
    """One line for each of the ``count`` slowest of edits made one after another: its time, its
    affected foci (urgent / all), its watched focus's lane, and how many foci the edit
    before it affected (whose wide foci may still have been draining). ``pairs`` starts with that
    edit before the first timed one (``latencies_ms`` times ``pairs[1:]``)."""
    foci = [_affected(wiring, edited) for edited, _ in pairs[:len(latencies_ms) + 1]]
    lines = slowest_lines(pairs, foci, latencies_ms, count)
    say("slowest edits: " + "; ".join(lines))
    return lines


def slowest_lines(pairs: Sequence[tuple[int, int]], foci: Sequence[tuple[set[int], set[int]]],
                  latencies_ms: Sequence[float], count: int) -> list[str]:
    """:func:`slowest_edits`' lines, slowest first, from each edit's (urgent, all) foci; ``pairs``
    and ``foci`` start with the edit before the first of ``latencies_ms``."""
    order = sorted(range(len(latencies_ms)), key=lambda i: -latencies_ms[i])[:count]
    return [f"{latencies_ms[i]:.0f} ms: {len(foci[i + 1][0])}/{len(foci[i + 1][1])} foci, watched "
            f"{_lane(pairs[i + 1][1], *foci[i + 1])}, after an edit of "
            f"{len(foci[i][1])}" for i in order]


def _lane(focus: int, close: set[int], affected: set[int]) -> str:
    """The lane the drain takes ``focus`` from, of an edit with those foci."""
    return next((lane for lane, foci in edit_lanes(close, affected).items() if focus in foci), "wide")


def rebuild_ms(wiring: Wiring, edited: Sequence[int]) -> list[float]:
    """Per edited note: ms to rebuild, in process, the foci its ``note.updated`` event affects, the
    urgent ones first as a drain takes them."""
    out: list[float] = []
    for note_id in edited:
        urgent, affected = _affected(wiring, note_id)
        started = time.perf_counter()
        for part in (sorted(urgent), sorted(affected - urgent)):
            if part:
                wiring.rebuild(part)
        out.append((time.perf_counter() - started) * 1000)
    return out


def floor_figures(single: dict[str, Any], rebuilt_ms: Sequence[float], round_trip_ms: float,
                  debounce_ms: int, stages: dict[str, dict[str, float]],
                  first_rebuilt_ms: float | None = None) -> dict[str, Any]:
    """The keys of the module docstring, beside a topology's single-edit figures."""
    floor = percentile(rebuilt_ms, .5) + round_trip_ms + debounce_ms
    first = single.get("warmup_ms") or [math.nan]
    own = math.nan if first_rebuilt_ms is None else first_rebuilt_ms + round_trip_ms + debounce_ms
    figures = {"stages": stages, "floor_ms": floor, "floor_rebuild_ms": percentile(rebuilt_ms, .5),
               "floor_round_trip_ms": round_trip_ms, "floor_debounce_ms": debounce_ms,
               "p95_over_floor": ratio(single["p95_ms"], floor),
               "first_edit_over_floor": ratio(first[0], floor),
               "first_edit_floor_ms": own, "first_edit_over_own_floor": ratio(first[0], own),
               "p95_over_own_floors": _over_own_floors(
                   single, [r + round_trip_ms + debounce_ms for r in rebuilt_ms])}
    say(f"edit stages: {_line(stages)}; floor {floor:.0f} ms (rebuild "
        f"{figures['floor_rebuild_ms']:.0f} + broker {round_trip_ms:.1f} + debounce {debounce_ms}); "
        f"p95 {figures['p95_over_floor']:.2f}× the floor, first edit "
        f"{figures['first_edit_over_floor']:.2f}× (its own floor {own:.0f} ms: "
        f"{figures['first_edit_over_own_floor']:.2f}×); each edit over its own floor, p95 "
        f"{figures['p95_over_own_floors']:.2f}×")
    return figures


def _over_own_floors(single: dict[str, Any], floors_ms: Sequence[float]) -> float:
    """The p95 of each measured edit's time over its own floor (module docstring)."""
    samples = single.get("samples_ms") or []
    if single.get("timeouts") or not samples or not floors_ms:
        return math.nan
    paired = min(len(samples), len(floors_ms))  # (the floors cover the first edits only)
    return percentile([ms / floor for ms, floor in zip(samples[:paired], floors_ms[:paired],
                                                        strict=True)], .95)


def _line(stages: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{stage} {v['p50_ms']:.1f}/{v['p95_ms']:.1f}" for stage, v in stages.items())
