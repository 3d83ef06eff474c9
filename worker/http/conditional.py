"""Conditional reads of a context: a strong ``ETag`` per answer and ``If-None-Match`` → ``304``.

Invariants, each argued from how the tag is made:

* **The tag changes exactly when the answer's bytes change.** It is a digest of the *variant*
  that chose the bytes (the path, hence the format, and the parameters that select a context:
  tokenLimit, seed, strategy, viewer) and of the bytes' own digest. Same variant and same bytes
  give the same tag, so a rebuild that rewrote identical bytes keeps it; any other byte changes
  the bytes' digest, hence the tag (SHA-256, the tag cut to 128 bits: a collision is not a
  practical event; SHA-256 rather than BLAKE2b because processors hash it in hardware, twice as
  fast on a hit's bytes). The bytes' digest is taken once per bytes object answered: every
  tokenLimit from a trace's full limit on answers one kept object (service.answers), so a read
  at a new tokenLimit digests a hundred bytes, not the answer again.
* **Different tokenLimits and formats never share a tag**, even where their bytes agree (a short
  note's context is often the same at every limit): the variant is digested with the bytes.
* **A 304 never hides a change.** The tag is computed from the answer the read would have sent
  now, through the same path (snapshot, or live when the snapshot is outdated or the change feed
  is behind), so ``304`` means "the bytes you hold are the bytes you would get". It costs a hit
  and a digest: no SQL on a hit.
* ``If-Modified-Since`` is **not** evaluated. ``Last-Modified`` (the time the answer was computed)
  has a second's resolution, and two rebuilds within one second with different bytes would look
  unchanged to it; only the tag validates. ``Cache-Control: private, no-cache`` lets a client keep
  a copy but makes it revalidate before every use, so it never uses a copy the service would not
  serve now; ``Vary: Authorization`` because Doughnut's tokens choose the viewer.

Parsing and formatting of the header fields are werkzeug's (RFC 9110's weak comparison for
``If-None-Match``, ``*`` included).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from werkzeug.http import http_date, parse_etags, quote_etag

__all__ = ["CACHE_CONTROL", "VARIANT_PARAMETERS", "Validators", "url_path", "validators"]

#: the query parameters that select an answer (anything else does not change the bytes)
VARIANT_PARAMETERS = ("tokenLimit", "seed", "strategy", "viewer")
CACHE_CONTROL = "private, no-cache"
_DIGEST_BYTES = 16


@dataclass(frozen=True, slots=True)
class Validators:
    """An answer's validators: its quoted strong ``etag`` and the headers that carry them (as ASGI
    sends them: lower-case names, latin-1 bytes)."""

    etag: str
    headers: tuple[tuple[bytes, bytes], ...]

    def not_modified(self, if_none_match: str | None) -> bool:
        """Whether a request's ``If-None-Match`` already names this answer (RFC 9110 §13.1.2)."""
        if if_none_match is None:
            return False
        return parse_etags(if_none_match).contains_weak(self.etag.strip('"'))


@lru_cache(maxsize=4096)
def _http_date(seconds: int) -> str:
    """``Last-Modified`` of an answer computed ``seconds`` after the epoch (a second's resolution:
    a rebuild writes many snapshots within one, and every hit of one formats it again)."""
    return http_date(seconds)


def url_path(scope: Mapping[str, Any]) -> str:
    """The request's path as its URL writes it (``request.url.path``: ``?``, ``#`` and ``\\``
    escaped), without building the whole URL (host, scheme, query) on every read."""
    path: str = scope["path"]
    return path.replace("?", "%3F").replace("#", "%23").replace("\\", "%5C")


def variant(path: str, query: Mapping[str, str]) -> bytes:
    """The variant as bytes: the path and the selecting parameters, in a fixed order."""
    chosen = "&".join(f"{name}={query[name]}" for name in VARIANT_PARAMETERS if name in query)
    return f"{path}?{chosen}".encode("utf-8", "surrogatepass")


def validators(body: bytes, path: str, query: Mapping[str, str], *,
               computed_s: float) -> Validators:
    """The validators of ``body`` answered at ``path`` with ``query``, computed at ``computed_s``
    (seconds since the epoch); those of the same bytes object kept (:class:`_Kept`)."""
    chosen, at_s = variant(path, query), int(computed_s)
    found = _KEPT.get(chosen, body, at_s)
    if found is None:
        found = _KEPT.put(chosen, body, at_s, _digested(chosen, _BODIES.digest(body), at_s))
    return found


def _digested(chosen: bytes, body_digest: bytes, computed_s: int) -> Validators:
    digest = hashlib.sha256(len(chosen).to_bytes(8, "big"))
    digest.update(chosen)
    digest.update(body_digest)
    etag = quote_etag(digest.hexdigest()[:2 * _DIGEST_BYTES])
    return Validators(etag, ((b"etag", etag.encode("latin-1")),
                             (b"last-modified", _http_date(computed_s).encode("latin-1")),
                             (b"cache-control", CACHE_CONTROL.encode("latin-1")),
                             (b"vary", b"Authorization")))


class _Kept:
    """The validators of the last ``size`` answers, by variant and the very bytes object answered.

    A hit read again answers the same bytes object each time (the result of the value the reader
    kept decoded, service.reader.decoded, or an answer it kept replayed), so its validators are
    found by the object's identity, without digesting or even hashing its bytes; any other body
    (computed now) is a miss that costs one lookup. Exact: an entry holds its bytes object, so
    while it is kept no other object can have its identity, and the validators are a function of
    the variant, the bytes and the time of computation, all compared. The oldest entry goes
    first; a lookup and a change are each one dict operation (threads share it safely)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: dict[tuple[bytes, int], tuple[bytes, int, Validators]] = {}

    def get(self, chosen: bytes, body: bytes, computed_s: int) -> Validators | None:
        found = self._kept.get((chosen, id(body)))
        if found is None or found[0] is not body or found[1] != computed_s:
            return None
        return found[2]

    def put(self, chosen: bytes, body: bytes, computed_s: int, tags: Validators) -> Validators:
        self._kept[chosen, id(body)] = (body, computed_s, tags)
        _drop_oldest(self._kept, self.size)
        return tags


class _Digests:
    """The SHA-256 of the last ``size`` bytes objects answered, by the object's identity (held
    by its entry, as in :class:`_Kept`, so no other object can have it meanwhile)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: dict[int, tuple[bytes, bytes]] = {}

    def digest(self, body: bytes) -> bytes:
        found = self._kept.get(id(body))
        if found is not None and found[0] is body:
            return found[1]
        digest = hashlib.sha256(body).digest()
        self._kept[id(body)] = (body, digest)
        _drop_oldest(self._kept, self.size)
        return digest


def _drop_oldest(kept: dict[Any, Any], size: int) -> None:
    """Drop ``kept``'s oldest entries past ``size`` (another thread may drop them meanwhile)."""
    while len(kept) > size:
        try:
            del kept[next(iter(kept))]
        except (KeyError, RuntimeError, StopIteration):
            break


_KEPT = _Kept(size=1024)
_BODIES = _Digests(size=1024)
