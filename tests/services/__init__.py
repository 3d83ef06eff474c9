"""Throw-away service instances for tests: a local Redis Cluster, a private RabbitMQ vhost.

Both are context managers usable outside pytest (:mod:`tests.services.redis_cluster`,
:mod:`tests.services.rabbitmq`); :mod:`tests.services.plugin` wraps them as pytest fixtures. A
service that cannot be started or reached raises :class:`ServiceUnavailable`, which the fixtures turn
into a test *failure* naming the cause: these tests never skip.
"""

from __future__ import annotations

__all__ = ["ServiceUnavailable"]


class ServiceUnavailable(RuntimeError):
    """A service the tests need could not be started or reached; the message says why and how."""
