"""The Redis side of the service: snapshots, the dirty set, locks and flags, rebuild progress.

Each module implements one port of :mod:`service.ports`; :mod:`storage.redis.client` builds the
client and is the one place redis-py errors are translated (``CacheUnavailable``). No redis-py type
or exception leaves this package (docs/architecture.md).
"""
