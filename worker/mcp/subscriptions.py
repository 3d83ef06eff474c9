"""The MCP server's resource handlers: templates, reads, and subscriptions in both protocol eras.

* 2026-07-28 (the SDK's default): a client lists the URIs it wants in a ``subscriptions/listen``
  request's ``resourceSubscriptions``; the response is the stream its
  ``notifications/resources/updated`` arrive on. No server-held session: on HTTP it is stateless like
  every other request, so any replica can serve it. URIs that cannot be read (malformed, unknown
  note) are left out of the acknowledgment, which the protocol defines as "not honoured".
* The handshake era (up to 2025-11-25): ``resources/subscribe`` / ``resources/unsubscribe`` within a
  session (stdio, or streamable HTTP with ``Mcp-Session-Id``); the notification goes to the session's
  standing stream. A refused subscription is an error naming the cause.

Either way a subscription first reads the resource, with the rules of a read, and a notification
is sent only when the resource's bytes changed (:mod:`worker.mcp.watch`), compared once more after
the subscription is registered so a change made meanwhile is not lost. A URI is taken only in its
canonical form (the form the templates produce), so the URIs a client gave are the URIs it is
notified of. A stream or session that ends takes its subscriptions with it (a session's on the
SDK's per-connection exit stack: a client that leaves without unsubscribing or whose session
expires leaves nothing behind); a server restart ends them all, and the protocol has the client
re-establish them (a new listen, or a new session after HTTP 404) and read again.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

from graphrag import GraphRagError, InvalidParameter, NoteNotFound
from service.ports import SnapshotChanges
from worker.mcp.resources import NoteResource, parse_uri, read, templates
from worker.mcp.source import ContextSource
from worker.mcp.watch import ResourceWatch

__all__ = ["RESOURCE_NOT_FOUND", "Limits", "Resources"]

log = logging.getLogger("graphrag.mcp")
#: The MCP specification's error code for a resource that does not exist.
RESOURCE_NOT_FOUND = -32002
#: How long one session may take to accept a notification before it is dropped.
SEND_S = 5.0


def _refusal(err: GraphRagError) -> MCPError:
    if isinstance(err, NoteNotFound):
        return MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {err}")
    if isinstance(err, InvalidParameter):
        return MCPError(types.INVALID_PARAMS, str(err))
    return MCPError(types.INTERNAL_ERROR, str(err))


def _connection(ctx: ServerRequestContext[Any]) -> object:
    """What stays the same across one session's requests (the SDK's per-connection object; a
    request's ``session`` is a new proxy each time)."""
    return getattr(ctx.session, "_connection", ctx.session)


def _on_close(ctx: ServerRequestContext[Any], then: Callable[[], None]) -> None:
    """Run ``then`` when the request's session ends (the SDK's per-connection exit stack): a
    client that leaves without unsubscribing, or whose session expires, leaves nothing behind."""
    stack = getattr(_connection(ctx), "exit_stack", None)
    if stack is not None:
        stack.callback(then)


@dataclass(frozen=True)
class Limits:
    """What clients may hold: subscriptions per session (``GRAPHRAG_MCP_MAX_SUBSCRIPTIONS``), URIs
    per listen stream (``GRAPHRAG_MCP_MAX_LISTEN_URIS``) and listen streams at once
    (``GRAPHRAG_MCP_MAX_LISTENS``). Each subscription costs a watch, a first read and about 8 KB;
    past a limit the request is refused with an error that names it."""

    per_session: int = 100
    per_listen: int = 100
    #: listen streams open at once, all clients together (each holds up to ``per_listen``)
    streams: int = 1_000


DEFAULT_LIMITS = Limits()


class Resources:
    """The handlers ``build_server`` registers, over one source and one change listener."""

    def __init__(self, source: ContextSource, changes: SnapshotChanges,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        self.source, self.limits = source, limits
        self.watch = ResourceWatch(source, changes.listener(), self._updated)
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus, max_subscriptions=limits.streams)
        self._sessions: dict[str, dict[object, Any]] = {}  # uri -> session key -> session
        self._held: dict[object, set[str]] = {}  # session key -> the uris it subscribed to

    @asynccontextmanager
    async def running(self, _: Any) -> AsyncIterator[dict[str, Any]]:
        """The server's lifespan: the watch loop runs while the server does."""
        async with anyio.create_task_group() as group:
            group.start_soon(self.watch.run)
            try:
                yield {}
            finally:
                self._listen.close()
                group.cancel_scope.cancel()
        self.watch.close()

    # -- reads ----------------------------------------------------------------------------------
    async def list_resources(self, _: ServerRequestContext[Any],
                             __: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        """No fixed list: every note's context is reached through the templates."""
        return types.ListResourcesResult(resources=[])

    async def list_templates(self, _: ServerRequestContext[Any], __: types.PaginatedRequestParams
                             | None) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=templates())

    async def read_resource(self, _: ServerRequestContext[Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        try:
            return await anyio.to_thread.run_sync(read, self.source, parse_uri(str(params.uri)))
        except GraphRagError as err:
            raise _refusal(err) from err

    # -- subscriptions --------------------------------------------------------------------------
    async def _add(self, uri: str) -> tuple[NoteResource, bytes]:
        try:
            resource = parse_uri(uri)
            return resource, await self.watch.add(resource)
        except GraphRagError as err:
            raise _refusal(err) from err

    async def subscribe(self, ctx: ServerRequestContext[Any],
                        params: types.SubscribeRequestParams) -> types.EmptyResult:
        held = self._held.get(_connection(ctx), set())
        if len(held) >= self.limits.per_session and str(params.uri) not in held:
            raise MCPError(types.INVALID_PARAMS, f"this session holds {len(held)} subscriptions, "
                           "the most GRAPHRAG_MCP_MAX_SUBSCRIPTIONS allows: unsubscribe first")
        resource, seen = await self._add(str(params.uri))
        key, sessions = _connection(ctx), self._sessions.setdefault(resource.uri, {})
        if key in sessions:  # subscribed already: one subscription per session
            self.watch.remove(resource)
        elif key not in self._held:
            self._held[key] = set()
            _on_close(ctx, lambda: self._drop_connection(key))
        sessions[key] = ctx.session
        self._held[key].add(resource.uri)
        if await self.watch.confirm(resource, seen):
            await self._send(resource.uri, key, ctx.session)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: ServerRequestContext[Any],
                          params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        try:
            resource = parse_uri(str(params.uri))
        except GraphRagError as err:
            raise _refusal(err) from err
        self._drop(resource.uri, _connection(ctx))
        return types.EmptyResult()

    async def listen(self, ctx: ServerRequestContext[Any],
                     params: types.SubscriptionsListenRequestParams
                     ) -> types.SubscriptionsListenResult:
        asked = params.notifications.resource_subscriptions or ()
        if len(asked) > self.limits.per_listen:
            raise MCPError(types.INVALID_PARAMS, f"{len(asked)} resources in one listen; at most "
                           f"{self.limits.per_listen} (GRAPHRAG_MCP_MAX_LISTEN_URIS)")
        kept: list[tuple[NoteResource, bytes]] = []
        try:
            for uri in asked:
                try:
                    kept.append(await self._add(uri))
                except MCPError as err:
                    log.info("listen: not honouring %s (%s)", uri, err)
            wanted = params.notifications.model_copy(
                update={"resource_subscriptions": [r.uri for r, _ in kept] or None})
            async with anyio.create_task_group() as group:
                # runs once the handler below has joined the bus (before its first await)
                group.start_soon(self._confirm, kept)
                result = await self._listen(ctx, params.model_copy(update={"notifications": wanted}))
            return result
        finally:
            for resource, _ in kept:
                self.watch.remove(resource)

    async def _confirm(self, kept: list[tuple[NoteResource, bytes]]) -> None:
        for resource, seen in kept:
            if await self.watch.confirm(resource, seen):
                await self.bus.publish(ResourceUpdated(uri=resource.uri))

    async def _updated(self, uri: str) -> None:
        """Tell every listen stream (through the bus) and every session subscribed to ``uri``,
        the sessions side by side (one that stopped reading holds up no other)."""
        await self.bus.publish(ResourceUpdated(uri=uri))
        async with anyio.create_task_group() as group:
            for key, session in list(self._sessions.get(uri, {}).items()):
                group.start_soon(self._send, uri, key, session)

    async def _send(self, uri: str, key: object, session: Any) -> None:
        with anyio.move_on_after(SEND_S):
            try:
                await session.send_resource_updated(uri)
                return
            except Exception as err:
                log.info("dropping a subscription of %s: %s", uri, err)
        self._drop(uri, key)

    def _drop(self, uri: str, key: object) -> None:
        """End one session's subscription to ``uri`` (if it has one)."""
        if self._sessions.get(uri, {}).pop(key, None) is not None:
            self._held.get(key, set()).discard(uri)
            self.watch.remove(parse_uri(uri))

    def _drop_connection(self, key: object) -> None:
        """A session ended: every subscription it held ends with it."""
        for uri in list(self._held.get(key, ())):
            self._drop(uri, key)
        self._held.pop(key, None)
