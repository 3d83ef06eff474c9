"""The service fixtures of :mod:`tests.services.plugin`, for the tests in this directory.

Once the root conftest loads the plugin (``pytest_plugins = ("tests.services.plugin",)``), delete
these imports: fixtures defined twice would start a second session cluster.
"""

from __future__ import annotations

from tests.services.plugin import (
    cluster_client,
    cluster_prefix,
    rabbitmq_module_url,
    rabbitmq_url,
    redis_cluster_info,
)

__all__ = [
    "cluster_client",
    "cluster_prefix",
    "rabbitmq_module_url",
    "rabbitmq_url",
    "redis_cluster_info",
]
