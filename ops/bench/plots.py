"""The PNG plots of the benchmark report (matplotlib, Agg backend): reader latency, live compute and
invalidation latency, rebuild throughput and SQL per snapshot, cost per snapshot against graph size.

:data:`PLOTS` names every file with its title, in the order the report shows them; the report links
exactly the files :func:`write_plots` returns, which is none at all when matplotlib is not installed
(a notice on stderr, never a failed run: the plots are optional, the figures in ``latest.json`` are
not).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ops.bench.targets import finite

__all__ = ["PLOTS", "plot_live", "plot_reader", "plot_scaling", "plot_throughput", "write_plots"]

PLOTS = {"reader_latency.png": "Reader latency (CDF)",
         "live_invalidation_latency.png": "Live compute and invalidation latency (CDF)",
         "throughput.png": "Rebuild throughput and SQL per snapshot",
         "scaling.png": "Cost per snapshot against graph size"}


def _cdf(ax: Any, values: Sequence[float], label: str) -> None:
    if values:
        ordered = sorted(values)
        ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=label)


def _save(plt: Any, fig: Any, path: Path) -> None:
    """Every plot is laid out, written and let go the same way (110 dpi)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_reader(plt: Any, samples: dict[str, list[float]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, label in (("raw_us", "raw GET + orjson.loads"), ("hit_us", "SnapshotReader.get hit"),
                       ("http_us", "HTTP hit (loopback)"), ("http_304_us", "HTTP 304 (loopback)")):
        _cdf(ax, samples.get(key, []), label)
    ax.set(xscale="log", xlabel="latency (µs, log)", ylabel="fraction of reads", title=PLOTS[path.name])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    _save(plt, fig, path)


def plot_live(plt: Any, samples: dict[str, list[float]], path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for key in sorted(k for k in samples if k.startswith("live_")):
        _cdf(left, samples[key], key.removeprefix("live_").removesuffix("_ms"))
    left.set(xscale="log", xlabel="live compute (ms, log)", ylabel="fraction", title="live compute")
    _cdf(right, samples.get("invalidation_ms", []), "webhook → fresh snapshot")
    right.axvline(500, color="red", linestyle="--", label="p95 target 500 ms")
    right.set(xlabel="ms", title="single-edit invalidation")
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
        ax.legend()
    _save(plt, fig, path)


def plot_throughput(plt: Any, results: dict[str, Any], path: Path) -> None:
    by = results["rebuild"]["by_strategy"]
    names = list(by)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, title in ((left, "snapshots_per_s", "snapshots/s (one process)"),
                           (right, "sql_per_snapshot", "SQL statements per snapshot")):
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], [by[n]["batched"][key] for n in names], 0.4, label="batched")
        ax.bar([x + 0.2 for x in xs], [by[n]["baseline"][key] for n in names], 0.4, label="baseline")
        ax.set_xticks(list(xs), names)
        ax.set(yscale="log", title=title)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend()
    left.axhline(1000, color="red", linestyle="--")
    right.axhline(0.5, color="red", linestyle="--")
    _save(plt, fig, path)


def plot_scaling(plt: Any, results: dict[str, Any], path: Path) -> None:
    points = sorted(results["scaling"], key=lambda p: p["notes"])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p["notes"] for p in points], [p["ms_per_snapshot"] for p in points], marker="o",
            label="first pass")
    again = [p for p in points if finite(p.get("second_pass_ms_per_snapshot"))]
    if again:
        ax.plot([p["notes"] for p in again], [p["second_pass_ms_per_snapshot"] for p in again],
                marker="s", linestyle="--", label="second pass (warm)")
        ax.legend()
    ax.set(xscale="log", xlabel="notes in the database (log)", ylabel="ms per snapshot",
           title=PLOTS[path.name], ylim=(0, None))
    ax.grid(True, which="both", alpha=0.3)
    _save(plt, fig, path)


def write_plots(results: dict[str, Any], samples: dict[str, list[float]], out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("notice: matplotlib is not installed; no plots", file=sys.stderr)
        return []
    plot_reader(plt, samples, out / "reader_latency.png")
    plot_live(plt, samples, out / "live_invalidation_latency.png")
    plot_throughput(plt, results, out / "throughput.png")
    plot_scaling(plt, results, out / "scaling.png")
    return list(PLOTS)
