"""Measuring and housekeeping Redis for the benchmark: raw reads, memory per key kind, a claimed
database for a broker, deleting a prefix.

The benchmark (``ops/bench``) compares the reader with what a bare client does for the same key,
so :func:`get_latencies_us` is exactly that: one ``GET`` and one ``orjson.loads`` per key, timed on
the caller's client (the one the reader uses too, so both pay the same connection); for a packed
trace snapshot, :func:`packed_latencies_us` does what a bare client does to get its default answer
as data: ``GET``, the header line parsed, the result inflated and parsed (service.packing).
Everything else here is bookkeeping with plain signatures (URLs, prefixes, key names, integers);
clients are opaque ``Any`` to callers, and every redis-py error leaves as
:class:`~graphrag.core.errors.CacheUnavailable`, so nothing outside this package sees a redis-py
type. Not on any request path.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
import redis
import zstandard

from graphrag.core.errors import CacheUnavailable
from graphrag.tree.render import loads as loads_json

__all__ = [
    "ClaimedDatabase",
    "claim_empty_database",
    "connect",
    "disconnect",
    "get_latencies_us",
    "memory_by_kind",
    "packed_latencies_us",
    "pending_messages",
    "release_database",
    "server_version",
    "unlink_prefix",
]

#: keys per SCAN page, per MEMORY USAGE pipeline and per UNLINK
_PAGE = 1000


@contextmanager
def _translated(what: str) -> Iterator[None]:
    """Any redis-py error (not only unavailability: a refused command too) as CacheUnavailable."""
    try:
        yield
    except redis.RedisError as err:
        raise CacheUnavailable(f"{what}: {err.__class__.__name__}: {err}") from err


def connect(url: str, *, timeout_s: float = 10.0) -> Any:
    """A plain client (no retries, ``decode_responses=False``) that has answered PING."""
    with _translated(f"redis at {urlsplit(url).hostname}:{urlsplit(url).port}"):
        client = redis.Redis.from_url(url, socket_timeout=timeout_s,
                                      socket_connect_timeout=min(timeout_s, 2.0))
        client.ping()
    return client


def disconnect(client: Any) -> None:
    """Close the client's connections."""
    client.close()


def server_version(client: Any) -> str:
    with _translated("INFO server"):
        info: Any = client.info("server")
    return str(info["redis_version"])


def get_latencies_us(client: Any, keys: Sequence[str]) -> list[float]:
    """Microseconds of ``orjson.loads(client.get(key))`` for each key, in order (a missing key
    fails: the caller times keys it has just written)."""
    clock, loads, out = time.perf_counter_ns, orjson.loads, []
    with _translated("GET"):
        for key in keys:
            started = clock()
            loads(client.get(key))
            out.append((clock() - started) / 1000)
    return out


def packed_latencies_us(client: Any, keys: Sequence[str], *,
                        decompressor: zstandard.ZstdDecompressor | None = None) -> list[float]:
    """Microseconds of a bare client's read of each packed snapshot's default answer: ``GET``, the
    header line parsed, its result's frame decompressed and parsed (a result may hold a lone surrogate
    escape, which only the fallback parser reads); one decompressor for every read, as the reader
    keeps one per thread: ``decompressor``, for a caller timing a key at a time (a new one's first
    read allocates its context, about 15 µs more)."""
    clock, loads, out = time.perf_counter_ns, orjson.loads, []
    decompress = (decompressor or zstandard.ZstdDecompressor()).decompress
    with _translated("GET"):
        for key in keys:
            started = clock()
            header, _, stream = client.get(key).partition(b"\n")
            loads_json(decompress(stream[:loads(header)["resultFrameBytes"]]))
            out.append((clock() - started) / 1000)
    return out


def _scan(client: Any, prefix: str) -> Iterator[list[bytes]]:
    """The keys under ``<prefix>:``, in pages of up to ``_PAGE``."""
    page: list[bytes] = []
    for key in client.scan_iter(match=f"{prefix}:*", count=_PAGE):
        page.append(key)
        if len(page) == _PAGE:
            yield page
            page = []
    if page:
        yield page


def memory_by_kind(client: Any, prefix: str) -> dict[str, tuple[int, int]]:
    """Kind -> (keys, bytes) of ``MEMORY USAGE <key> SAMPLES 0`` for every key under ``<prefix>:``;
    the kind is the key's next segment (``snap``, ``dep``, ``shows``, ``gen``, ...)."""
    totals: dict[str, tuple[int, int]] = {}
    with _translated("MEMORY USAGE"):
        for page in _scan(client, prefix):
            pipe = client.pipeline(transaction=False)
            for key in page:
                pipe.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
            for key, size in zip(page, pipe.execute(), strict=True):
                kind = key[len(prefix) + 1 :].split(b":", 1)[0].decode()
                keys, total = totals.get(kind, (0, 0))
                totals[kind] = (keys + 1, total + int(size or 0))
    return totals


def unlink_prefix(client: Any, prefix: str) -> int:
    """UNLINK every key under ``<prefix>:`` (a page of keys per command); how many went."""
    removed = 0
    with _translated("UNLINK"):
        for page in _scan(client, prefix):
            removed += int(client.unlink(*page))
    return removed


# -- a Redis database of its own for a broker ------------------------------------------------------
@dataclass(frozen=True)
class ClaimedDatabase:
    """A Redis database this process claimed: its URL, a client on it, the claim's marker."""

    url: str
    client: Any
    marker: str
    token: str


def _on_database(url: str, db: int) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{db}"))


def _claim(url: str, marker: str, token: str, ttl_s: int) -> ClaimedDatabase | None:
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
    if client.set(marker, token, nx=True, ex=ttl_s) and client.dbsize() == 1:
        return ClaimedDatabase(url, client, marker, token)
    if client.get(marker) == token.encode():
        client.delete(marker)
    client.close()
    return None


def claim_empty_database(server_url: str, databases: Sequence[int], *, marker: str,
                         ttl_s: int = 3600) -> ClaimedDatabase | None:
    """The first of ``databases`` on the server of ``server_url`` that is empty, claimed by setting
    ``marker`` (NX, expiring after ``ttl_s``): a database holding only our marker is ours. None when
    every one is in use."""
    token = uuid.uuid4().hex
    with _translated("claiming a Redis database"):
        for db in databases:
            claimed = _claim(_on_database(server_url, db), marker, token, ttl_s)
            if claimed is not None:
                return claimed
    return None


def release_database(claim: ClaimedDatabase) -> None:
    """FLUSHDB the claimed database if our marker is still there (else someone else's), and close."""
    try:
        with _translated("releasing a Redis database"):
            if claim.client.get(claim.marker) == claim.token.encode():
                claim.client.flushdb()
    finally:
        claim.client.close()


def pending_messages(claim: ClaimedDatabase, queues: Sequence[str]) -> int:
    """Messages a Celery/kombu Redis broker on the claimed database still holds: the lengths of the
    lists named ``<queue>*`` (priority lists included) plus kombu's ``unacked`` hash."""
    client = claim.client
    with _translated("reading the broker's queues"):
        queued = sum(int(client.llen(key)) for queue in queues
                     for key in client.scan_iter(match=f"{queue}*"))
        return queued + int(client.hlen("unacked"))
