"""Prometheus metrics of the reader, the workers and change capture, on a registry the caller owns.

Every name here is part of the operators' contract: the alert rules (ops/prometheus/rules) and the
dashboard (ops/grafana) query them, and the tests scrape the running processes for each name those
files use, so a renamed metric fails the suite. Labelled metrics whose label values are known
have them created up front, so every series exists (at 0) from the first scrape: a rate over a
series that appears only with its first event misses that event, and a family without samples is
invisible to a multiprocess scrape (a worker's pool processes, worker.celery.metrics).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from service.ports import LANES

__all__ = ["EDIT_STAGES", "TOKEN_OUTCOMES", "CdcMetrics", "ReaderMetrics", "WorkMetrics",
           "edit_stages", "http_responses", "token_lookups"]

#: What a lookup of a Doughnut access token found (service.users): ``error`` when the database did
#: not answer.
TOKEN_OUTCOMES = ("user", "unknown", "expired", "error")
#: From a focus marked dirty to its snapshot written: debounce, queueing and the rebuild itself.
_FRESH_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)

#: An edit's path, stage after stage (docs/architecture.md, "The flow of an edit"): in the process it
#: arrives at (the webhook's or change capture's) ``outdate`` (its notes' snapshots outdated) and
#: ``enqueue`` (the event task sent); in a worker ``delivery`` (sent to started), ``resolve`` (the
#: affected foci found, outdated and marked dirty), ``debounce`` (dirty until a drain takes the
#: focus: the drain's own message, the debounce, the wait for a free shard), ``compute`` and
#: ``write`` (the drain batch's computations, and its compare-and-set writes with their race check).
EDIT_STAGES = ("outdate", "enqueue", "delivery", "resolve", "debounce", "compute", "write")
_STAGE_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05,
                    0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 30.0)

_LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                      0.5, 1.0, 2.5)


def _own(registry: CollectorRegistry | None) -> CollectorRegistry:
    """``registry``, or a fresh one (tests, and processes whose metrics nobody scrapes)."""
    return registry if registry is not None else CollectorRegistry()


@dataclass(frozen=True)
class ReaderMetrics:
    """Counters and latency histograms of :class:`service.reader.SnapshotReader`."""

    hits: Counter
    stale: Counter
    outdated: Counter
    misses: Counter
    live_computes: Counter
    lock_waits: Counter
    cas_rejections: Counter
    redis_errors: Counter
    database_errors: Counter
    distrusted: Counter
    viewer_proven: Counter
    viewer_live: Counter
    viewer_remembered: Counter
    read_latency_s: Histogram
    live_latency_s: Histogram

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> ReaderMetrics:
        """Register the metrics on ``registry`` (a fresh one when None, e.g. in tests)."""
        reg = _own(registry)

        def counter(name: str, doc: str) -> Counter:
            return Counter(f"graphrag_{name}", doc, registry=reg)

        return cls(
            hits=counter("cache_hits", "Fresh snapshots served"),
            stale=counter("cache_stale", "Snapshots served past their soft TTL or configuration"),
            outdated=counter("cache_outdated", "Snapshots older than an event that affects them, "
                             "computed live instead"),
            misses=counter("cache_misses", "Reads that found no usable snapshot"),
            live_computes=counter("live_computes", "Contexts computed live by the reader"),
            lock_waits=counter("lock_waits", "Reads that waited for another reader's live compute"),
            cas_rejections=counter("cas_rejections", "Write-backs refused by a newer generation"),
            redis_errors=counter("redis_errors", "Reads that found Redis unavailable"),
            database_errors=counter("database_errors", "Live computes that found the database down"),
            distrusted=counter("feed_distrusted_reads", "Reads answered from the database because "
                               "the change feed was behind (service.feed)"),
            viewer_proven=counter("viewer_snapshot_reads", "Reads for another user than the "
                                  "snapshot's, served from it once proven the same (service.viewers)"),
            viewer_live=counter("viewer_live_reads", "Reads for another user than the snapshot's, "
                                "computed live (not proven the same, or no snapshot)"),
            viewer_remembered=counter("viewer_remembered_reads", "Reads for another user than "
                                      "the snapshot's, served from their own view computed "
                                      "before (service.reader.viewer_reads)"),
            read_latency_s=Histogram("graphrag_read_seconds", "SnapshotReader.get latency",
                                     ["source"], registry=reg, buckets=_LATENCY_BUCKETS_S),
            live_latency_s=Histogram("graphrag_live_compute_seconds", "Live compute latency",
                                     registry=reg, buckets=_LATENCY_BUCKETS_S),
        )


@dataclass(frozen=True)
class CdcMetrics:
    """What ``graphrag cdc`` exposes: its throughput, its full rebuilds and how far behind it is."""

    transactions: Counter
    events: Counter
    full_rebuilds: Counter
    behind_seconds: Gauge
    behind_transactions: Gauge
    behind_bytes: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> CdcMetrics:
        reg = _own(registry)
        return cls(
            transactions=Counter("graphrag_cdc_transactions", "Committed transactions read from the "
                                 "log (position stored after their events were enqueued)", registry=reg),
            events=Counter("graphrag_cdc_events", "Events enqueued for them", registry=reg),
            full_rebuilds=Counter("graphrag_cdc_full_rebuilds", "Full rebuilds queued (purged "
                                  "position, DDL, TRUNCATE)", registry=reg),
            behind_seconds=Gauge("graphrag_cdc_behind_seconds", "How long ago the server was at "
                                 "the stored position (NaN until it catches up after a start)",
                                 registry=reg),
            behind_transactions=Gauge("graphrag_cdc_behind_transactions", "Transactions between "
                                      "the stored position and the server's (GTID positions)",
                                      registry=reg),
            behind_bytes=Gauge("graphrag_cdc_behind_bytes", "Bytes of log between the stored "
                               "position and the server's (file positions in the same file)",
                               registry=reg),
        )


@dataclass(frozen=True)
class WorkMetrics:
    """What a worker process counts: drain batches, snapshots rebuilt by path (``drain``: the dirty
    set; ``full``: a full rebuild's pieces), and how long a focus waited from dirty to fresh, by the
    lane of its batch (``urgent``: the edited notes and the foci that show them first; ``near``:
    the rest of a small edit's foci; ``wide``: the rest of a large edit's)."""

    drain_batches: Counter
    rebuilt: Counter
    rebuild_errors: Counter
    requeued: Counter
    fresh_s: Histogram
    stages: Histogram

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> WorkMetrics:
        """Register the metrics, every label value created (a worker's pool process makes its own
        after fork: tasks.runtime)."""
        reg = _own(registry)
        metrics = cls(
            drain_batches=Counter("graphrag_drain_batches", "Drain batches finished (dirty foci "
                                  "rebuilt and let go)", registry=reg),
            rebuilt=Counter("graphrag_rebuilt_snapshots", "Snapshots written by the workers",
                            ["path"], registry=reg),
            rebuild_errors=Counter("graphrag_rebuild_errors", "Foci whose rebuild failed (bad "
                                   "data; logged)", ["path"], registry=reg),
            requeued=Counter("graphrag_drain_requeued", "Foci put back into the dirty set (an "
                             "edit raced their rebuild)", registry=reg),
            fresh_s=Histogram("graphrag_edit_fresh_seconds", "From a focus marked dirty (by an "
                              "edit's event) to its snapshot written", ["lane"], registry=reg,
                              buckets=_FRESH_BUCKETS_S),
            stages=edit_stages(reg),
        )
        for path in ("drain", "full"):
            metrics.rebuilt.labels(path)
            metrics.rebuild_errors.labels(path)
        for lane in LANES:
            metrics.fresh_s.labels(lane)
        return metrics


def edit_stages(registry: CollectorRegistry) -> Histogram:
    """Seconds an edit spends in each of :data:`EDIT_STAGES` (every stage's series created): the
    webhook's or change capture's process observes the first two, a worker the others."""
    histogram = Histogram("graphrag_edit_stage_seconds", "Seconds an edit spends in each stage "
                          "of its path, from its arrival to its snapshots written",
                          ["stage"], registry=registry, buckets=_STAGE_BUCKETS_S)
    for stage in EDIT_STAGES:
        histogram.labels(stage)
    return histogram


def http_responses(registry: CollectorRegistry) -> Counter:
    """HTTP responses by route template (``unmatched`` for none) and status code
    (worker.http.metrics)."""
    return Counter("graphrag_http_responses", "HTTP responses by route and status code",
                   ["route", "code"], registry=registry)


def session_lookups(registry: CollectorRegistry) -> Counter:
    """Questions to Doughnut about whose web session a cookie carries, by outcome (user,
    anonymous, error; service.sessions)."""
    counter = Counter("graphrag_session_lookups", "Questions to Doughnut about a web session's "
                      "user, by outcome (user, anonymous, error)", ["outcome"], registry=registry)
    for outcome in ("user", "anonymous", "error"):
        counter.labels(outcome)
    return counter


def token_lookups(registry: CollectorRegistry) -> Counter:
    """Lookups of Doughnut access tokens by outcome (:data:`TOKEN_OUTCOMES`)."""
    counter = Counter("graphrag_token_lookups", "Lookups of Doughnut access tokens by outcome "
                      "(user, unknown, expired, error)", ["outcome"], registry=registry)
    for outcome in TOKEN_OUTCOMES:
        counter.labels(outcome)
    return counter
