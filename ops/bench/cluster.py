"""The invalidation figures on a Redis Cluster: a local 3-primary cluster started for the section.

Three ``redis-server --cluster-enabled yes`` on free loopback ports in a temporary directory,
joined with ``redis-cli --cluster create`` and awaited until every node reports
``cluster_state:ok``; stopped and removed afterwards. The section then rebuilds the sampled foci's
wavefront snapshots into the cluster (a prefix of their own) and measures single-edit invalidation
and the 1,000-edit burst exactly as the services section does, with the worker and ``graphrag serve``
on ``GRAPHRAG_REDIS_CLUSTER=true`` and the broker on the single Redis (a cluster cannot be one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from ops.bench.graph import Graph, wiring_for
from ops.bench.helpers import listening, say, wait_for
from ops.bench.invalidation import burst, edit_plan, quiet, single_edits
from ops.bench.plan import WARMUP_EDITS, Bench, BenchError
from ops.bench.services import services
from storage.redis import probe
from storage.redis.client import build_client

__all__ = ["cluster_section", "local_cluster"]


def _ports(count: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def _ok(port: int) -> bool:
    done = subprocess.run(["redis-cli", "-p", str(port), "cluster", "info"], capture_output=True,
                          text=True, timeout=10, check=False)
    return "cluster_state:ok" in done.stdout


@contextlib.contextmanager
def local_cluster(primaries: int = 3) -> Iterator[str]:
    """The URL of one node of a fresh local cluster (stopped and removed on exit)."""
    root, ports = Path(tempfile.mkdtemp(prefix="graphrag-bench-cluster-")), _ports(2 * primaries)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(primaries):
            folder = root / f"node{i}"
            folder.mkdir()
            procs.append(subprocess.Popen(
                ["redis-server", "--port", str(ports[2 * i]), "--cluster-port", str(ports[2 * i + 1]),
                 "--bind", "127.0.0.1", "--cluster-enabled", "yes", "--cluster-config-file",
                 str(folder / "nodes.conf"), "--dir", str(folder), "--save", "", "--appendonly", "no"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        nodes = [f"127.0.0.1:{ports[2 * i]}" for i in range(primaries)]
        if not wait_for(lambda: all(listening(ports[2 * i]) for i in range(primaries)), 10, 0.05):
            raise BenchError("the cluster's redis-server processes did not start")
        subprocess.run(["redis-cli", "--cluster", "create", *nodes, "--cluster-replicas", "0",
                        "--cluster-yes"], capture_output=True, timeout=60, check=True)
        if not wait_for(lambda: all(_ok(ports[2 * i]) for i in range(primaries)), 30, 0.1):
            raise BenchError("the local cluster did not reach cluster_state:ok")
        say(f"local Redis Cluster of {primaries} primaries on ports {ports[0::2]}")
        yield f"redis://{nodes[0]}/0"
    except (OSError, subprocess.SubprocessError) as err:
        raise BenchError(f"could not start a local Redis Cluster: {err}") from err
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)


def cluster_section(bench: Bench, graph: Graph, foci: list[int]) -> dict[str, Any]:
    """Single edits and the burst with the snapshots in a local Redis Cluster."""
    with local_cluster() as url:
        client = build_client(url, timeout_ms=2_000, cluster=True)
        side = dataclasses.replace(bench, redis_url=url, client=client, redis_cluster=True,
                                   broker_redis_url=bench.redis_url, run=f"{bench.run}-cluster",
                                   samples={})
        try:
            report = wiring_for(side, graph, "main").rebuild(foci)
            say(f"cluster: {report.count} snapshots rebuilt into the cluster")
            return {**_edits(side, graph, foci), "primaries": 3}
        finally:
            probe.unlink_prefix(client, side.base)
            client.close()


def _edits(bench: Bench, graph: Graph, foci: list[int]) -> dict[str, Any]:
    pairs, notes = edit_plan(bench, graph, foci, WARMUP_EDITS + bench.plan.edits, 8)
    wiring = wiring_for(bench, graph, "main")
    with services(bench, graph) as svc, httpx.Client(base_url=svc.base_url, timeout=10) as http:
        single = single_edits(bench, graph, svc, pairs, http, "c")
        quiet(svc, wiring)
        return {**single, **burst(bench, graph, svc, notes, http, "c")}
