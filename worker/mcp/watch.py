"""Subscriptions to note contexts: which resources are watched, what each showed last, and the loop
that looks again when the cache says a watched note's snapshot was written.

A resource is "updated" exactly when the bytes it reads as change: the loop hears of a write of a
watched note's snapshot (:class:`service.ports.ChangeListener`), re-reads each subscribed resource of
that note through the tools' own source (a cache hit, no SQL, unless the snapshot is missing or
outdated) and compares the digest of its bytes with the one it recorded. A rebuild that wrote the
same bytes, or changed the snapshot only beyond the resource's tokenLimit, is heard and then found
equal: nothing is sent. A note that can no longer be read (deleted) is a change too, reported once.
The listener also reports a watch when it takes effect and every watch again after a lost
connection, so a change made while a subscription was being set up, or while Redis was unreachable,
is found by the same comparison.

Subscribing reads the resource first, so a subscription follows the same rules as a read (an
unknown note or a malformed URI is refused), and the digest that read saw is compared once more
after the subscription is registered (:meth:`ResourceWatch.confirm`): a change made while it was
being set up reaches the new subscriber too. Resources are counted per subscriber: a note is watched
while any subscriber wants one of its resources.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread

from graphrag import GraphRagError, NoteNotFound
from graphrag.core.errors import CacheUnavailable
from service.ports import ChangeListener
from worker.mcp.resources import NoteResource, answer, digest
from worker.mcp.source import ContextSource

__all__ = ["ResourceWatch"]

log = logging.getLogger("graphrag.mcp")
#: How long one wait for news lasts (also how soon a new watch is sent to Redis).
HEAR_S = 0.2
#: How long the loop rests after the cache could not be reached.
RETRY_S = 1.0
_GONE = b"gone"


class ResourceWatch:
    """The subscribed resources and the loop that tells ``on_update`` which of them changed."""

    def __init__(self, source: ContextSource, listener: ChangeListener,
                 on_update: Callable[[str], Awaitable[None]]) -> None:
        self.source, self.listener, self.on_update = source, listener, on_update
        self._count: dict[NoteResource, int] = {}
        self._last: dict[NoteResource, bytes] = {}

    def watched(self) -> set[NoteResource]:
        return set(self._count)

    async def add(self, resource: NoteResource) -> bytes:
        """Subscribe once more; reads the resource (raising as a read does) and returns the digest
        this subscriber saw, for :meth:`confirm` once its subscription is registered."""
        served = await anyio.to_thread.run_sync(answer, self.source, resource)
        seen = digest(served.body)
        self._last.setdefault(resource, seen)
        self._count[resource] = self._count.get(resource, 0) + 1
        self.listener.watch([resource.note_id])
        return seen

    async def confirm(self, resource: NoteResource, seen: bytes) -> bool:
        """Whether the resource changed since a subscriber saw ``seen``: asked once the
        subscription is registered, so a change that landed while it was being set up (heard
        before there was anyone to tell, or before the note was looked at for it) is not lost."""
        now = await self._look_safely(resource)
        if now is None or now == seen:
            return False
        self._last[resource] = now
        return True

    def remove(self, resource: NoteResource) -> None:
        """Unsubscribe once; the note stops being watched with its last resource."""
        left = self._count.get(resource, 0) - 1
        if left > 0:
            self._count[resource] = left
            return
        self._count.pop(resource, None)
        self._last.pop(resource, None)
        if not any(r.note_id == resource.note_id for r in self._count):
            self.listener.unwatch([resource.note_id])

    async def run(self) -> None:
        """Hear, look again, tell: until cancelled. Nothing it meets ends it (the tools share
        the process): the cache unreachable, or anything unexpected, is logged and retried."""
        while True:
            try:
                heard = await anyio.to_thread.run_sync(self.listener.heard, HEAR_S,
                                                       abandon_on_cancel=True)
            except CacheUnavailable as err:
                log.warning("subscriptions cannot hear of changes: %s", err)
                await anyio.sleep(RETRY_S)
                continue
            except Exception:
                log.exception("subscriptions: the change listener failed")
                await anyio.sleep(RETRY_S)
                continue
            for resource in [r for r in self._count if r.note_id in heard]:
                await self._look_again(resource)

    async def _look_again(self, resource: NoteResource) -> None:
        seen = await self._look_safely(resource)
        if seen is not None and resource in self._last and self._last[resource] != seen:
            self._last[resource] = seen
            try:
                await self.on_update(resource.uri)
            except Exception:
                log.exception("subscriptions: telling of %s failed", resource.uri)

    async def _look_safely(self, resource: NoteResource) -> bytes | None:
        """The resource's digest now, or None when nothing can answer (the next news looks
        again)."""
        try:
            return await anyio.to_thread.run_sync(self._look, resource)
        except GraphRagError as err:
            log.warning("cannot re-read %s: %s", resource.uri, err)
        except Exception:
            log.exception("cannot re-read %s", resource.uri)
        return None

    def _look(self, resource: NoteResource) -> bytes:
        """The digest of the resource's bytes, or "gone" for a note that no longer exists."""
        try:
            return digest(answer(self.source, resource).body)
        except NoteNotFound:
            return _GONE

    def close(self) -> Any:
        self.listener.close()
