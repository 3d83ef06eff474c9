"""Loopback ports for servers a test starts: the one place that asks the kernel for them.

The kernel hands out ports nothing listens on, and the sockets give them back at once; the servers
the test starts next bind them. A random pick from a range is not the same: once it fell on a port
in use.
"""

from __future__ import annotations

import socket
from contextlib import ExitStack


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports the kernel just handed out (held together, so all differ)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def free_port() -> int:
    """A loopback port nothing listens on now."""
    return free_ports(1)[0]
