"""Servers the reliability suites kill and cut: a private ``redis-server`` and a TCP proxy.

:class:`RedisServer` runs on a free port and may be killed and restarted; :class:`TcpProxy` stands in
front of MariaDB and can cut every connection and refuse new ones, then come back on the same port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest
import redis

from tests.e2e.conftest import wait_until
from tests.ports import free_port


class RedisServer:
    """``redis-server`` on a free port, no persistence: a restart comes back empty (flushed)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is required by the crash tests but is not on PATH", pytrace=False)
        self.starts += 1
        log = (self.folder / f"redis-{self.starts}.log").open("ab")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--daemonize", "no", "--dir", str(self.folder)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        probe = redis.Redis.from_url(self.url(0), socket_timeout=1, socket_connect_timeout=1)

        def answers() -> bool:
            try:
                return bool(probe.ping())
            except redis.RedisError:
                return False

        try:
            wait_until(answers, timeout_s=10, what=f"redis-server answers on port {self.port}",
                       details=lambda: (self.folder / f"redis-{self.starts}.log").read_text())
        finally:
            probe.close()
        return self

    def kill9(self) -> None:
        """SIGKILL the server (and reap it)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    stop = kill9


# -- a TCP proxy in front of MariaDB -------------------------------------------------------------------
class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``upstream``; :meth:`cut` closes every connection and refuses
    new ones (nothing listens), :meth:`restore` listens on the same port again."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream, self.port = upstream, free_port()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self.accepted = 0

    def start(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True,
                                  name="proxy-accept")
        thread.start()
        self._threads.append(thread)
        return self

    restore = start

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._sockets |= {client, upstream}
                self.accepted += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True,
                                 name="proxy-pump").start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(src)
            self._drop(dst)

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()

    def cut(self) -> None:
        """Close the listener and every proxied connection: the database is unreachable."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets = list(self._sockets)
        if listener is not None:
            listener.close()
        for sock in sockets:
            self._drop(sock)
        for thread in self._threads:
            thread.join(timeout=2)
        self._threads.clear()

    close = cut
