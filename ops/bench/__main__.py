"""``python -m ops.bench [--quick]``: run every section in order and write the report.

The order matters: the batched wavefront rebuild writes the ``<base>:main`` snapshots that the
memory, reader and invalidation sections then read; live compute and the profile run before the
services start, so no worker competes with them for the two cores; titles edited by the
invalidation section are restored in a ``finally``, and every Redis key of the run is deleted in
another, whatever fails. ``--innodb-buffer-pool-mb`` grows InnoDB's buffer pool for the run only
(``make bench``: the 1M-note table must be in memory, as in production) and puts it back after.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import httpx

from graphrag import GraphRagError
from ops.bench.cdc import cdc_section
from ops.bench.cluster import cluster_section
from ops.bench.graph import Graph, graph_counts, machine_info, open_graph, pages
from ops.bench.helpers import elapsed_s, ratio, say, worst
from ops.bench.invalidation import broker_section, restore_titles, services_section
from ops.bench.live import live_section
from ops.bench.memory import memory_section
from ops.bench.plan import FULL, QUICK, Bench, BenchError
from ops.bench.profile import profile_section
from ops.bench.reader import reader_section
from ops.bench.rebuild import rebuild_section
from ops.bench.report import write_report
from ops.bench.scale import scale_section
from ops.bench.scaling import scaling_section
from ops.bench.today import today_section
from ops.bench.today_scale import today_scaling_section
from ops.bench.whole import whole_section
from storage.database import (
    buffer_pool_bytes,
    close_engine,
    open_engine,
    set_buffer_pool_bytes,
    with_database,
)
from storage.redis import probe

__all__ = ["buffer_pool", "main", "measure", "run"]


def _services(bench: Bench, graph: Graph, foci: list[int], results: dict[str, Any]) -> None:
    try:
        reading, results["invalidation"] = services_section(bench, graph, foci)
    finally:
        restore_titles(graph)
    results.setdefault("reader", {}).update(reading)


def _rabbitmq(bench: Bench, graph: Graph, foci: list[int], results: dict[str, Any]) -> None:
    try:
        results["invalidation_rabbitmq"] = broker_section(bench, graph, foci, bench.amqp_url)
    finally:
        restore_titles(graph)


def _cluster(bench: Bench, graph: Graph, foci: list[int], results: dict[str, Any]) -> None:
    try:
        results["invalidation_cluster"] = cluster_section(bench, graph, foci)
    finally:
        restore_titles(graph)


def _cdc(bench: Bench, graph: Graph, foci: list[int], results: dict[str, Any]) -> None:
    """Change capture's section; its commit-to-fresh figures, stages and floor are also the
    ``invalidation_cdc`` section, beside the other topologies'."""
    results["cdc"] = cdc_section(bench)
    results["invalidation_cdc"] = results["cdc"]["cdc"]


def _live(bench: Bench, graph: Graph, foci: list[int], results: dict[str, Any]) -> None:
    results["live"] = live_section(bench, graph)
    if "reader" in results:
        results["live"]["speedup_hit_vs_live"] = ratio(results["live"]["p50_ms"] * 1000,
                                                       results["reader"]["hit_p50_us"])


def _scaling(bench: Bench, graph: Graph, foci: list[int], results: dict[str, Any]) -> None:
    results["scaling"] = scaling_section(bench, graph, results["rebuild"]["by_strategy"]["wavefront"]
                                         ["batched"])


def _today(bench: Bench, graph: Graph, foci: list[int], results: dict[str, Any]) -> None:
    results["today"] = today_section(bench)
    results["doughnut_reads"] = results["today"].pop("doughnut_reads")
    results.setdefault("memory", {})["focus_context_bytes_per_snapshot"] = (
        results["today"]["memory"]["bytes_per_snapshot"])
    full, rebuilt = results["today"]["full"], results.setdefault("rebuild", {})
    rebuilt.setdefault("full_speedup", {})["focus-context"] = full["speedup"]
    rows = [rebuilt.get("full_rows_per_snapshot_first_pieces"), full["rows_per_snapshot"]]
    rebuilt["full_rows_per_snapshot_first_pieces"] = worst(rows)


def _whole(bench: Bench, graph: Graph, foci: list[int], results: dict[str, Any]) -> None:
    """Whole runs of both models: the rows decoded per snapshot of the target (ops.bench.whole)."""
    results["whole"] = whole_section(bench)
    results.setdefault("rebuild", {})["full_rows_per_snapshot"] = results["whole"]["rows_per_snapshot"]


def _today_scale(bench: Bench, graph: Graph, foci: list[int], results: dict[str, Any]) -> None:
    """The full run's sizes of today's Doughnut; the quick run measures none and reports nothing."""
    if at_size := today_scaling_section(bench):
        results["today_scale"] = at_size


Section = Callable[[Bench, Graph, list[int], dict[str, Any]], None]
#: name -> (what it runs, the sections it reads the results or snapshots of), in running order.
SECTIONS: dict[str, tuple[Section, tuple[str, ...]]] = {
    "rebuild": (lambda b, g, f, r: r.update(rebuild=rebuild_section(b, g, f)), ()),
    "memory": (lambda b, g, f, r: r.update(memory=memory_section(b)), ("rebuild",)),
    "reader": (lambda b, g, f, r: r.update(reader=reader_section(b, g, f)), ("rebuild",)),
    "live": (_live, ()),
    "profile": (lambda b, g, f, r: r.update(profile=profile_section(b, g, f)), ()),
    "services": (_services, ("rebuild",)),
    "rabbitmq": (_rabbitmq, ("rebuild",)),
    "cluster": (_cluster, ("rebuild",)),
    "cdc": (_cdc, ()),
    "scale": (lambda b, g, f, r: r.update(scale=scale_section(b, g)), ()),
    "today": (_today, ()),
    "whole": (_whole, ()),
    "scaling": (_scaling, ("rebuild",)),
    "today_scale": (_today_scale, ()),
}


def selected(only: Sequence[str]) -> list[str]:
    """The sections to run for ``--only`` (all when empty), with what they need, in order."""
    unknown = set(only) - SECTIONS.keys()
    if unknown:
        raise BenchError(f"unknown section(s) {', '.join(sorted(unknown))}; "
                         f"choose from {', '.join(SECTIONS)}")
    wanted = set(only or SECTIONS)
    wanted |= {need for name in wanted for need in SECTIONS[name][1]}
    return [name for name in SECTIONS if name in wanted]


def measure(bench: Bench, graph: Graph, only: Sequence[str] = ()) -> dict[str, Any]:
    """The selected sections on one graph, in the order the module docstring explains."""
    foci = pages(graph.ids, bench.plan.rebuild_notes)
    results: dict[str, Any] = {"machine": machine_info(bench, graph), "graph": graph_counts(graph)}
    say(f"graph: {results['graph']}")
    for name in selected(only):
        SECTIONS[name][0](bench, graph, foci, results)
    return results


@contextlib.contextmanager
def buffer_pool(mysql_url: str, mb: int) -> Iterator[None]:
    """For the run, grow InnoDB's buffer pool to ``mb`` MiB (SET GLOBAL; needs the privilege) and
    put the old size back afterwards. A production database keeps its working set in memory; the
    1M-note table (~540 MB) does not fit the 128 MB default, and disk reads would swamp the figure."""
    engine = open_engine(with_database(mysql_url, None))
    try:
        before = buffer_pool_bytes(engine)
        grow = mb > 0 and before < mb * 2**20
        try:
            if grow:
                set_buffer_pool_bytes(engine, mb * 2**20)
                say(f"InnoDB buffer pool {before // 2**20} MB -> {mb} MB for this run")
        except GraphRagError as err:
            say(f"could not grow the InnoDB buffer pool ({err}); measuring with {before // 2**20} MB")
            grow = False
        try:
            yield
        finally:
            if grow:
                set_buffer_pool_bytes(engine, before)
                say(f"InnoDB buffer pool back to {before // 2**20} MB")
    finally:
        close_engine(engine)


def run(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """(results for latest.json, samples for the plots)."""
    plan = QUICK if args.quick else FULL
    if args.nightly_notes is not None:
        plan = replace(plan, nightly_notes=args.nightly_notes)
    client = probe.connect(args.redis_url)
    bench = Bench(plan, args.mysql_url, args.redis_url, client, seed=args.seed,
                  amqp_url=args.amqp_url)
    say(f"{'quick' if args.quick else 'full'} run {bench.run}: keys under {bench.base}:*")
    started = dt.datetime.now(dt.UTC)
    try:
        with buffer_pool(args.mysql_url, args.innodb_buffer_pool_mb):
            graph = open_graph(bench, plan.main_size)
            try:
                results = measure(bench, graph, args.only)
            finally:
                close_engine(graph.engine)
    finally:
        say(f"deleted {probe.unlink_prefix(client, bench.base)} Redis keys under {bench.base}")
        probe.disconnect(client)
    head = {"schema": 1, "mode": "quick" if args.quick else "full", "run": bench.run,
            "started_at": started.isoformat(timespec="seconds"),
            "seconds": round(elapsed_s(), 1), "plan": asdict(plan)}
    return {**head, **results}, bench.samples


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench",
        description="The benchmark of issue 5, against real MariaDB and Redis.")
    parser.add_argument("--quick", action="store_true",
                        help="100k notes only (3 to 6 minutes on 2 cores)")
    parser.add_argument("--mysql-url", default="mysql+pymysql://root@127.0.0.1:3306",
                        help="SQLAlchemy URL of the MariaDB/MySQL server (no database)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0",
                        help="Redis for the snapshots (the broker takes an empty database of 15..8)")
    parser.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672",
                        help="RabbitMQ for the broker comparison (a private vhost is made with "
                             "rabbitmqctl)")
    parser.add_argument("--out", default="benchmarks/results", help="where the report goes")
    parser.add_argument("--only", type=lambda v: [p.strip() for p in v.split(",") if p.strip()],
                        default=[], metavar="SECTIONS",
                        help=f"run only these sections (comma-separated: {', '.join(SECTIONS)}) "
                             "and what they need; prints the JSON instead of writing the report")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    parser.add_argument("--nightly-notes", type=int, default=None, metavar="N",
                        help="notes of the 1M-note 2026 graph the full run's nightly rebuilds with "
                             "1 and 2 processes (default 50,000; 0: all, hours on 2 cores and "
                             "~28 GB of Redis)")
    parser.add_argument("--innodb-buffer-pool-mb", type=int, default=0, metavar="MB",
                        help="grow InnoDB's buffer pool to MB for the run and restore it after "
                             "(SET GLOBAL; default 0: leave the server as it is)")
    return parser.parse_args(argv)


def _reason(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return f"{err.__class__.__name__}: {lines[0] if lines else ''}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run, write ``latest.json``, ``latest.md`` and the plots to ``--out``; 1 on a failed run."""
    args = _parse(argv)
    try:
        results, samples = run(args)
    except BenchError as err:
        say(f"error: {err}")
        return 1
    except (GraphRagError, httpx.HTTPError, OSError) as err:
        say(f"error: {_reason(err)}")
        return 1
    if args.only:
        print(json.dumps(results, indent=1, default=str))
        return 0
    for path in write_report(results, samples, Path(args.out)):
        say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
