"""pytest fixtures for the throw-away services (``pytest_plugins = ("tests.services.plugin",)``).

* ``redis_cluster_info`` (session): one local 3-primary Redis Cluster for the whole test session;
* ``cluster_client`` (session): a ``RedisCluster`` on it (bytes replies, like the service's client);
* ``cluster_prefix`` (function): a key prefix of the test's own, its keys deleted afterwards on every
  primary. The prefix has no ``{``: a brace in it would become every key's hash tag and put all of a
  test's keys in one slot, hiding exactly the cross-slot mistakes these tests exist to catch;
* ``rabbitmq_url`` (function) and ``rabbitmq_module_url`` (module): the amqp URL of a private vhost,
  deleted afterwards (a vhost costs about 2 s of ``rabbitmqctl`` calls, so share one where possible).

A service that cannot be started or reached fails the test (setup error) with the cause; it never
skips. Registered once at the root (``pytest_plugins``), the session cluster is started once for all
test directories; ``tests/services/conftest.py`` imports the fixtures for that directory meanwhile.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TypeVar

import pytest
from redis.cluster import RedisCluster

from tests.services import ServiceUnavailable
from tests.services.rabbitmq import rabbitmq_vhost
from tests.services.redis_cluster import ClusterInfo, shared_cluster

__all__ = [
    "cluster_client",
    "cluster_prefix",
    "entered",
    "rabbitmq_module_url",
    "rabbitmq_url",
    "redis_cluster_info",
]

T = TypeVar("T")


def entered(manager: Callable[[], AbstractContextManager[T]]) -> Iterator[T]:
    """Enter ``manager()``, turning :class:`ServiceUnavailable` into a test failure; yield its value."""
    try:
        context = manager()
        value = context.__enter__()
    except ServiceUnavailable as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield value
    finally:
        context.__exit__(None, None, None)


@pytest.fixture(scope="session")
def redis_cluster_info() -> ClusterInfo:
    """A 3-primary local Redis Cluster shared by the test process (stopped and removed at its exit)."""
    try:
        return shared_cluster()
    except ServiceUnavailable as err:
        pytest.fail(str(err), pytrace=False)


@pytest.fixture(scope="session")
def cluster_client(redis_cluster_info: ClusterInfo) -> Iterator[RedisCluster]:
    """``RedisCluster.from_url`` on one node; the client discovers the others (CLUSTER SLOTS)."""
    client = RedisCluster.from_url(redis_cluster_info.startup_url, socket_timeout=5,
                                   socket_connect_timeout=2)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def cluster_prefix(cluster_client: RedisCluster) -> Iterator[str]:
    """``test:<hex>``: this test's key prefix; its keys are deleted from every primary afterwards."""
    prefix = f"test:{uuid.uuid4().hex[:12]}"
    yield prefix
    for key in list(cluster_client.scan_iter(match=f"{prefix}:*", count=1000)):
        cluster_client.delete(key)


@pytest.fixture
def rabbitmq_url() -> Iterator[str]:
    """The amqp URL of a private vhost on the local RabbitMQ, deleted after the test."""
    yield from entered(rabbitmq_vhost)


@pytest.fixture(scope="module")
def rabbitmq_module_url() -> Iterator[str]:
    """Like ``rabbitmq_url``, shared by the tests of one module (use distinct queue names)."""
    yield from entered(rabbitmq_vhost)
