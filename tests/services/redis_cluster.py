"""A local Redis Cluster of ``masters`` primaries (no replicas), started and removed by the tests.

:func:`redis_cluster` starts one ``redis-server --cluster-enabled yes`` per primary, each on a free
loopback port with its own directory, no persistence (``--save "" --appendonly no``) and its
``nodes.conf`` under the temporary directory; it joins them with ``redis-cli --cluster create
--cluster-replicas 0 --cluster-yes`` and returns only once *every* node reports ``cluster_state:ok``,
all 16384 slots assigned and every other node known, so a client may start from any node's URL.

On exit every process it started is stopped (SIGTERM, then SIGKILL after a grace period) and the
directory is removed, also when startup failed half-way. Anything that stops the cluster from coming
up (no ``redis-server`` binary, a server that exits, a create that fails, a cluster that never
settles) raises :class:`tests.services.ServiceUnavailable` with the cause and the server's log tail.

Ports: each node gets a data port and a cluster-bus port, both picked free by the kernel and passed
as ``--port`` / ``--cluster-port`` (Redis 7.0 or newer), so nothing depends on ``port + 10000``.
``GRAPHRAG_TEST_REDIS_SERVER`` and ``GRAPHRAG_TEST_REDIS_CLI`` override the binaries on ``PATH``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import redis

from tests.ports import free_ports
from tests.services import ServiceUnavailable

__all__ = ["SLOT_COUNT", "ClusterInfo", "ClusterNode", "cluster_ready", "redis_cluster"]

SLOT_COUNT = 16384
SERVER_ENV = "GRAPHRAG_TEST_REDIS_SERVER"
CLI_ENV = "GRAPHRAG_TEST_REDIS_CLI"
_START_TIMEOUT_S = 10.0
_SETTLE_TIMEOUT_S = 30.0
_STOP_GRACE_S = 5.0


class ClusterNode:
    """One primary's ``redis-server``: started, killed and started again on the same ports and
    ``nodes.conf``, so it rejoins with its slots (and, with no persistence, no data)."""

    def __init__(self, server: str, directory: Path, port: int, bus_port: int) -> None:
        self.server, self.directory, self.port, self.bus_port = server, directory, port, bus_port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ClusterNode:
        self.directory.mkdir(exist_ok=True)
        self.proc = _start_node(self.server, self.directory, self.port, self.bus_port)
        _await_ping(self.proc, self.port, self.directory)
        return self

    def kill9(self) -> None:
        """SIGKILL: whatever the node held is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Where the cluster listens: ``urls`` of every primary, ``startup_url`` the one to hand out;
    ``nodes`` the processes, for tests that kill and restart one."""

    urls: tuple[str, ...]
    startup_url: str
    nodes: tuple[ClusterNode, ...] = ()

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(int(url.rsplit(":", 1)[1]) for url in self.urls)

    def await_settled(self) -> None:
        """Until every node reports the whole cluster healthy again (after a restart)."""
        _await_settled(list(self.ports), len(self.urls))


@contextmanager
def redis_cluster(tmp_path: Path, masters: int = 3) -> Iterator[ClusterInfo]:
    """Start a ``masters``-primary cluster under ``tmp_path``; stop it and remove its files on exit."""
    if masters < 3:
        raise ValueError("redis-cli --cluster create needs at least 3 primaries")
    server, cli = _binary(SERVER_ENV, "redis-server"), _binary(CLI_ENV, "redis-cli")
    root = tmp_path / f"redis-cluster-{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True)
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, root, ignore_errors=True)
        ports = free_ports(2 * masters)
        nodes = tuple(ClusterNode(server, root / f"node{i}", ports[2 * i], ports[2 * i + 1])
                      for i in range(masters))
        for node in nodes:
            stack.callback(node.stop)
            node.start()
        _create(cli, [node.port for node in nodes])
        _await_settled([node.port for node in nodes], masters)
        urls = tuple(f"redis://127.0.0.1:{node.port}" for node in nodes)
        yield ClusterInfo(urls=urls, startup_url=urls[0], nodes=nodes)


def cluster_ready(port: int, masters: int) -> bool:
    """Whether the node on ``port`` sees a healthy cluster: state ok, all slots, every primary."""
    with closing(redis.Redis(port=port, socket_timeout=2, decode_responses=True)) as client:
        info = client.cluster("INFO")
    return (info.get("cluster_state") == "ok"
            and int(info.get("cluster_slots_assigned", 0)) == SLOT_COUNT
            and int(info.get("cluster_slots_ok", 0)) == SLOT_COUNT
            and int(info.get("cluster_known_nodes", 0)) == masters)


def _binary(env: str, name: str) -> str:
    found = os.environ.get(env, "").strip() or shutil.which(name)
    if not found:
        raise ServiceUnavailable(
            f"{name} is required for the Redis Cluster tests but is not on PATH; install Redis 7 "
            f"or point {env} at the binary."
        )
    return found


def _start_node(server: str, directory: Path, port: int, bus_port: int) -> subprocess.Popen[bytes]:
    argv = [
        server, "--port", str(port), "--cluster-port", str(bus_port), "--bind", "127.0.0.1",
        "--cluster-enabled", "yes", "--cluster-config-file", str(directory / "nodes.conf"),
        "--cluster-node-timeout", "5000", "--dir", str(directory), "--save", "",
        "--appendonly", "no", "--daemonize", "no", "--logfile", str(directory / "redis.log"),
    ]
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as err:
        raise ServiceUnavailable(f"could not run {server}: {err}") from err


def _await_ping(proc: subprocess.Popen[bytes], port: int, directory: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    with closing(redis.Redis(port=port, socket_connect_timeout=0.2, socket_timeout=1)) as client:
        while True:
            if proc.poll() is not None:
                raise ServiceUnavailable(f"redis-server on port {port} exited with code "
                                         f"{proc.returncode}:\n{_log_tail(directory)}")
            with suppress(redis.ConnectionError):
                if client.ping():
                    return
            if time.monotonic() > deadline:
                raise ServiceUnavailable(f"redis-server on port {port} did not answer PING within "
                                         f"{_START_TIMEOUT_S:.0f} s:\n{_log_tail(directory)}")
            time.sleep(0.02)


def _create(cli: str, ports: list[int]) -> None:
    argv = [cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
            "--cluster-replicas", "0", "--cluster-yes"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_SETTLE_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ServiceUnavailable(f"redis-cli --cluster create failed: {err}") from err
    if done.returncode != 0:
        raise ServiceUnavailable("redis-cli --cluster create failed "
                                 f"(exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr}")


def _await_settled(ports: list[int], masters: int) -> None:
    deadline = time.monotonic() + _SETTLE_TIMEOUT_S
    pending = list(ports)
    while pending:
        pending = [port for port in pending if not cluster_ready(port, masters)]
        if pending and time.monotonic() > deadline:
            raise ServiceUnavailable(f"the cluster did not reach cluster_state:ok with all "
                                     f"{SLOT_COUNT} slots on ports {pending} within "
                                     f"{_SETTLE_TIMEOUT_S:.0f} s")
        if pending:
            time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _log_tail(directory: Path, lines: int = 15) -> str:
    try:
        return "\n".join((directory / "redis.log").read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log written)"


_SHARED: list[ClusterInfo] = []


def shared_cluster() -> ClusterInfo:
    """The test process's one 3-primary cluster, started at the first call and stopped when the
    process exits (the session fixture and the contract backends share it)."""
    if not _SHARED:
        folder = Path(tempfile.mkdtemp(prefix="graphrag-test-cluster-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)  # runs last (atexit is LIFO)
        manager = redis_cluster(folder)
        _SHARED.append(manager.__enter__())
        atexit.register(manager.__exit__, None, None, None)
    return _SHARED[0]
