"""Hearing of snapshot writes in Redis: one shard channel per note, published by the CAS scripts.

Every accepted write and every deletion of a focus's snapshots ``SPUBLISH``-es on
``<prefix>:changed:{id}`` from inside its Lua script (:mod:`storage.redis.scripts`), so the message
leaves exactly when the bytes were stored, on the node that stored them: a shard channel lives in
its hash tag's slot, so on a Cluster a write reaches only the node its note lives on and only the
listeners watching that note, never every node. A listener ``SSUBSCRIBE``-s to the channels of the
foci it watches (redis-py routes each to its slot's node and subscribes again after a reconnect).

No message is lost to a race or an outage: pub/sub delivers only to subscribers already there, so
the listener also reports a focus when its subscription is confirmed (the ``ssubscribe`` reply),
including the confirmations of a resubscription after a lost connection. Whoever listens re-reads
those foci and compares (:class:`service.ports.ChangeListener`), so a write made before the
subscription took effect, or while the connection was down, is still seen.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable
from typing import Any

from redis.exceptions import ResponseError

from graphrag.core.errors import CacheUnavailable
from storage.redis.client import is_cluster, translated
from storage.redis.keys import Keys

__all__ = ["RedisChangeListener", "RedisChanges"]

_NOTE = re.compile(rb"\{(\d+)\}$")
#: How long one wait on one node's connection lasts (a cluster's nodes are read in turn).
_SLICE_S = 0.05


class RedisChanges:
    """:class:`service.ports.SnapshotChanges` over the cache's own Redis (single or Cluster)."""

    def __init__(self, client: Any, keys: Keys) -> None:
        self.redis, self.keys = client, keys

    def listener(self) -> RedisChangeListener:
        return RedisChangeListener(self.redis, self.keys)


class RedisChangeListener:
    """:class:`service.ports.ChangeListener` on one pub/sub connection (one per node on a Cluster).

    ``watch``/``unwatch`` only record the wish; the thread calling ``heard`` sends the
    ``SSUBSCRIBE``/``SUNSUBSCRIBE`` itself, since a redis-py pub/sub object is not thread-safe. The
    connection is made at the first ``heard``, so a process can start while Redis is down. What was
    read before an error is kept for the next ``heard``: on a Cluster one node's failure must not
    lose what the others had already delivered."""

    def __init__(self, client: Any, keys: Keys) -> None:
        self.redis, self.keys, self._cluster = client, keys, is_cluster(client)
        self._pubsub: Any = None
        self._lock = threading.Lock()
        self._wanted: set[int] = set()
        self._subscribed: set[int] = set()
        self._pending: set[int] = set()

    def watch(self, note_ids: Iterable[int]) -> None:
        with self._lock:
            self._wanted.update(int(i) for i in note_ids)

    def unwatch(self, note_ids: Iterable[int]) -> None:
        with self._lock:
            self._wanted.difference_update(int(i) for i in note_ids)

    def watching(self) -> set[int]:
        with self._lock:
            return set(self._wanted)

    def heard(self, timeout_s: float) -> set[int]:
        try:
            with translated():
                if self._pubsub is None:
                    self._pubsub = self.redis.pubsub()
                self._follow_wishes()
                self._read(time.monotonic() + max(0.0, timeout_s))
        except ResponseError as err:  # e.g. a Redis before 7.0, or an ACL without the channels
            raise CacheUnavailable(f"cannot listen for snapshot writes: {err}") from err
        heard, self._pending = self._pending, set()
        with self._lock:
            return heard & self._wanted

    def close(self) -> None:
        if self._pubsub is not None:
            with translated():
                self._pubsub.close()

    # -- internals ------------------------------------------------------------------------------
    def _follow_wishes(self) -> None:
        with self._lock:
            new, gone = self._wanted - self._subscribed, self._subscribed - self._wanted
        if new:
            self._pubsub.ssubscribe(*(self.keys.changed(i) for i in sorted(new)))
        if gone:
            self._pubsub.sunsubscribe(*(self.keys.changed(i) for i in sorted(gone)))
        self._subscribed = (self._subscribed | new) - gone

    def _read(self, deadline: float) -> None:
        """Into ``_pending``, what arrives before ``deadline``: every message waiting once one
        came (or one was left from a call that failed)."""
        while True:
            wait_s = 0.0 if self._pending else max(0.0, deadline - time.monotonic())
            message = self._next(min(wait_s, _SLICE_S))
            if message is None:
                if self._pending or time.monotonic() >= deadline:
                    return
                continue
            note_id = self._note_of(message)
            if note_id is not None:
                self._pending.add(note_id)

    def _next(self, wait_s: float) -> dict[str, Any] | None:
        if not self._subscribed:  # nothing to read: a cluster's reader would return at once
            time.sleep(wait_s)
            return None
        if self._cluster:
            message: dict[str, Any] | None = self._pubsub.get_sharded_message(timeout=wait_s)
        else:
            message = self._pubsub.get_message(timeout=wait_s)
        return message

    def _note_of(self, message: dict[str, Any]) -> int | None:
        """The watched focus a message is about: a publication or a subscription taking effect."""
        if message.get("type") not in (b"smessage", "smessage", b"ssubscribe", "ssubscribe"):
            return None
        channel = message.get("channel") or b""
        found = _NOTE.search(channel.encode() if isinstance(channel, str) else bytes(channel))
        return int(found.group(1)) if found else None
