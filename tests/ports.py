"""A loopback port for a server a test starts: the one place that asks the kernel for it.

The kernel hands out a port nothing listens on, and the socket gives it back at once; a server the test
starts next binds it. A random pick from a range is not the same: once it fell on a port in use.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
