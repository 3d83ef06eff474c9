"""``graphrag context NOTE_ID --follow``: the context printed again each time its bytes change.

The same mechanism as MCP subscriptions (:mod:`worker.mcp.watch`), for a person at a terminal: the
note is watched through :class:`service.ports.ChangeListener`; on news of a write of its snapshot
(or once the watch took effect, or after a lost connection) the context is read again through the
reader and yielded only if its bytes differ from the last ones yielded. A rebuild that wrote the
same bytes yields nothing. While the cache is unreachable the loop waits and tries again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from graphrag.core.errors import CacheUnavailable
from service.ports import ChangeListener

__all__ = ["follow"]

log = logging.getLogger("graphrag.follow")
#: How long one wait for news lasts.
HEAR_S = 0.5
#: How long to rest after the cache could not be reached.
RETRY_S = 1.0


def follow(read: Callable[[], bytes], listener: ChangeListener, note_id: int,
           *, until: Callable[[], bool] = lambda: False) -> Iterator[bytes]:
    """The context now, then every changed version, until ``until()`` (or forever)."""
    listener.watch([note_id])
    last = read()
    yield last
    while not until():
        try:
            heard = listener.heard(HEAR_S)
        except CacheUnavailable as err:
            log.warning("cannot hear of changes: %s", err)
            time.sleep(RETRY_S)
            continue
        if note_id in heard and (now := read()) != last:
            last = now
            yield now
