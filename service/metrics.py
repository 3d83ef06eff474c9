"""Prometheus metrics of the reader and the rebuilds, on a registry the caller owns."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["CdcMetrics", "ReaderMetrics"]

_LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                      0.5, 1.0, 2.5)


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
    read_latency_s: Histogram
    live_latency_s: Histogram

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> ReaderMetrics:
        """Register the metrics on ``registry`` (a fresh one when None, e.g. in tests)."""
        reg = registry if registry is not None else CollectorRegistry()

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
        reg = registry if registry is not None else CollectorRegistry()
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
