"""The floor of an HTTP read: a bare ASGI app that GETs a stored value from Redis and returns it.

What one ``graphrag serve`` process is held against (ops.bench.saturation): the same server
(uvicorn with httptools, no access log), the same Redis, the same stored values, and nothing else:
no routing, parameters, authentication, decoding, validators or metrics. ``GET /k/<i>`` answers the
``i``-th key of the file ``GRAPHRAG_BENCH_FLOOR_KEYS`` (one key a line) as it is stored;
``GRAPHRAG_BENCH_FLOOR_REDIS`` is the Redis URL. Run as ``uvicorn ops.bench.floor_app:app``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from storage.redis.probe import connect

__all__ = ["app"]

_KEYS = Path(os.environ.get("GRAPHRAG_BENCH_FLOOR_KEYS", "/dev/null")).read_text().split()
_CLIENT = connect(os.environ.get("GRAPHRAG_BENCH_FLOOR_REDIS", "redis://127.0.0.1:6379/0"))
_TYPE = (b"content-type", b"application/octet-stream")


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    index = scope["path"].rpartition("/")[2]
    value = _CLIENT.get(_KEYS[int(index)]) if index.isdigit() and int(index) < len(_KEYS) else None
    body = value or b""
    await send({"type": "http.response.start", "status": 200 if value else 404,
                "headers": [_TYPE, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
