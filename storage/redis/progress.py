"""Progress of a full rebuild (nightly or on demand), recorded in one Redis hash.

Fields: ``run`` (id), ``startedAt``/``dispatchedAt``/``finishedAt`` (epoch ms), ``lastId`` (the last
note id the dispatcher handed out: the last piece's, not monotonic across notebooks),
``enqueued``/``done``/``errors`` (notes). ``graphrag rebuild --status`` prints it; the hash expires
a week after the last update.
"""

from __future__ import annotations

from typing import Any

from storage.redis.client import translated
from storage.redis.keys import Keys

__all__ = ["RedisProgress"]

_TTL_S = 7 * 86_400


class RedisProgress:
    """:class:`service.ports.ProgressLog`: one full-rebuild run at a time per ``name``."""

    def __init__(self, client: Any, keys: Keys, name: str = "nightly") -> None:
        self.redis, self.key = client, keys.progress(name)

    def start(self, run_id: str, *, now_ms: int) -> None:
        with translated():
            pipe = self.redis.pipeline(transaction=True)
            pipe.delete(self.key)
            pipe.hset(self.key, mapping={"run": run_id, "startedAt": now_ms, "lastId": 0,
                                         "enqueued": 0, "done": 0, "errors": 0})
            pipe.expire(self.key, _TTL_S)
            pipe.execute()

    def _bump(self, run_id: str, **fields: int) -> None:
        with translated():
            if self.redis.hget(self.key, "run") != run_id.encode():
                return  # a newer run took over; this one's late messages are not counted
            pipe = self.redis.pipeline(transaction=False)
            for name, value in fields.items():
                if name in ("lastId", "dispatchedAt", "finishedAt"):
                    pipe.hset(self.key, name, value)
                else:
                    pipe.hincrby(self.key, name, value)
            pipe.expire(self.key, _TTL_S)
            pipe.execute()

    def enqueued(self, run_id: str, count: int, *, last_id: int) -> None:
        self._bump(run_id, enqueued=count, lastId=last_id)

    def dispatched(self, run_id: str, *, now_ms: int) -> None:
        self._bump(run_id, dispatchedAt=now_ms)

    def done(self, run_id: str, count: int, *, errors: int, now_ms: int) -> None:
        self._bump(run_id, done=count, errors=errors)
        status = self.status()
        done, enqueued = int(status.get("done", 0)), int(status.get("enqueued", 0))
        if status.get("dispatchedAt") and done >= enqueued:
            self._bump(run_id, finishedAt=now_ms)

    def status(self) -> dict[str, int | str]:
        """The recorded fields (numbers as ints); empty when no run was recorded."""
        with translated():
            raw = self.redis.hgetall(self.key)
        out: dict[str, int | str] = {}
        for name, value in raw.items():
            text = value.decode() if isinstance(value, bytes) else str(value)
            key = name.decode() if isinstance(name, bytes) else str(name)
            out[key] = int(text) if text.lstrip("-").isdigit() else text
        return out
