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
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Generic, TypeVar

from werkzeug.http import http_date, parse_etags, quote_etag

__all__ = ["CACHE_CONTROL", "VARIANT_PARAMETERS", "Validators", "url_path", "validators"]

#: the query parameters that select an answer (anything else does not change the bytes)
VARIANT_PARAMETERS = ("tokenLimit", "seed", "strategy", "viewer")
CACHE_CONTROL = "private, no-cache"
_DIGEST_BYTES = 16
V = TypeVar("V")


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
    found = _TAGS.get((chosen, at_s), body)
    if found is None:
        found = _TAGS.put((chosen, at_s), body, _digested(chosen, _digest(body), at_s))
    return found


def _digest(body: bytes) -> bytes:
    """The SHA-256 of ``body``, taken once per bytes object answered (:class:`_Kept`)."""
    found = _DIGESTS.get(None, body)
    if found is None:
        found = _DIGESTS.put(None, body, hashlib.sha256(body).digest())
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


class _Kept(Generic[V]):
    """The last ``size`` values made from objects answered, by a key and the very object.

    A hit read again answers the same bytes object each time (the result of the value the reader
    kept decoded, service.reader.decoded, or an answer it kept replayed), so what was made from it
    (its digest; its validators at a variant and a time of computation, the key) is found by the
    object's identity, without digesting or even hashing its bytes; any other body (computed now)
    is a miss that costs one lookup. Exact: an entry holds its object, so while it is kept no
    other object can have its identity, and the value is a function of the key and the bytes,
    both compared. The oldest entry goes first; a lookup and a change are each one dict operation
    (threads share it safely)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: dict[tuple[Hashable, int], tuple[object, V]] = {}

    def get(self, key: Hashable, answered: object) -> V | None:
        found = self._kept.get((key, id(answered)))
        if found is None or found[0] is not answered:
            return None
        return found[1]

    def put(self, key: Hashable, answered: object, value: V) -> V:
        self._kept[key, id(answered)] = (answered, value)
        _drop_oldest(self._kept, self.size)
        return value


def _drop_oldest(kept: dict[Any, Any], size: int) -> None:
    """Drop ``kept``'s oldest entries past ``size`` (another thread may drop them meanwhile)."""
    while len(kept) > size:
        try:
            del kept[next(iter(kept))]
        except (KeyError, RuntimeError, StopIteration):
            break


_TAGS: _Kept[Validators] = _Kept(size=1024)
_DIGESTS: _Kept[bytes] = _Kept(size=1024)
