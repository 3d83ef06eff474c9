"""The packed form of a trace snapshot: a JSON header line, then two zstd frames (docs/redis.md).

A focus-context snapshot carries its result at the default tokenLimit (about 12 KB) and the trace
every other tokenLimit is replayed from (about 35 KB), and the trace repeats most of the result's
text. Stored as JSON they took 47 KB per snapshot; packed they take about a fifth of that:

    <header: a compact JSON object>\\n<zstd frame of the result><zstd frame of the trace>

* A compact JSON object never holds a raw newline (inside a string it is written ``\\n``), so the
  first newline byte ends the header, and a value without one is the plain JSON layout.
* The first frame is the result alone (``resultFrameBytes`` long), so a read at the default
  tokenLimit decompresses only it. The second is the trace, compressed with the result's bytes as
  a raw-content dictionary: zstd finds the text the two share as a single stream would, and a
  replay decompresses the trace without decompressing the result again.
* Level 3, measured on the 100k bench graph beside zlib level 3 (the packing before): the
  compressed bytes 10% fewer (8,974 against 9,980 on average), a third of the time to compress and
  about half the time to decompress the trace; ``MEMORY USAGE`` per snapshot 10,071 B (11,052 B).
* Any JVM reads it with zstd-jni (``Zstd.decompress``; the trace with the result bytes loaded as
  its dictionary, which zstd takes as raw content since it does not start with the dictionary
  magic); the checksums in the header (``resultCrc32``, ``traceCrc32``: ``java.util.zip.CRC32``) are
  of the decompressed bytes, as in the JSON layout.
* Each frame also carries zstd's content checksum (XXH64 of its bytes), which a zstd decompressor
  checks as it decompresses, zstd-jni's and ours alike. So our reader does not compute the CRCs
  again for such frames (a CRC-32 of a 31 KB trace costs about a quarter of its decompression);
  it checks them for frames written before, which carry none. 8 bytes per snapshot.
* A value packed the way earlier versions did (``"packing": "zlib"``: one zlib stream of the result,
  then the trace) is still read, so snapshots written before an upgrade stay served until rebuilt.

:func:`unpack` never raises: a header that does not parse, a frame that does not decompress to the
length the header names or does not check out (against its own checksum, or the header's CRC for a
frame without one), is None (a miss). The trace is checked when it is needed.
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
import zstandard

__all__ = ["PACKING", "PackedTrace", "is_packed", "pack", "unpack"]

PACKING = "zstd"
LEGACY = "zlib"
LEVEL = 3
_NEWLINE = b"\n"
#: what a snapshot's result or trace never reaches (tens of KB): the most a header can make a
#: read allocate before the bytes are checked
_MAX_BYTES = 2**26
_RAW = zstandard.DICT_TYPE_RAWCONTENT
#: each thread's decompressor of result frames (no dictionary): making one costs about as much as
#: decompressing a result, and one may not be used by two threads at once
_LOCAL = threading.local()


class PackedTrace(Protocol):
    """A packed value's trace, still compressed."""

    @property
    def trace_crc32(self) -> int:
        """The CRC-32 of the trace's bytes, as its header names it."""

    def inflate(self) -> bytes | None:
        """The trace's bytes, or None when the value does not hold the trace its header names."""


@dataclass(frozen=True)
class _ZstdTrace:
    """The trace frame and the result it was compressed against, decompressed (and checked)
    when it is asked for; a fresh decompressor each time, so a shared envelope is safe to read
    from any thread."""

    result: bytes = field(repr=False)
    frame: bytes = field(repr=False)
    trace_bytes: int
    trace_crc32: int

    def inflate(self) -> bytes | None:
        return _opened(_decompressor(self.result), self.frame, self.trace_bytes, self.trace_crc32)


@dataclass(frozen=True)
class _ZlibTrace:
    """A legacy value's trace: from where inflating the result stopped (``after_result``: that
    inflater, copied for each use; ``tail``: the stream it had not read)."""

    after_result: Any = field(repr=False)
    tail: bytes = field(repr=False)
    trace_bytes: int
    trace_crc32: int

    def inflate(self) -> bytes | None:
        inflater = self.after_result.copy()
        try:
            trace: bytes = inflater.decompress(self.tail, self.trace_bytes + 1)
        except zlib.error:
            return None
        if not inflater.eof or len(trace) != self.trace_bytes or zlib.crc32(trace) != self.trace_crc32:
            return None
        return trace


def _plain() -> zstandard.ZstdDecompressor:
    held: zstandard.ZstdDecompressor | None = getattr(_LOCAL, "plain", None)
    if held is None:
        held = _LOCAL.plain = zstandard.ZstdDecompressor()
    return held


def _decompressor(result: bytes) -> zstandard.ZstdDecompressor:
    return zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(result, dict_type=_RAW))


def pack(header: dict[str, Any], result: bytes, trace: bytes) -> bytes:
    """The packed value of ``header`` (without the sizes), ``result`` and ``trace``."""
    first = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True).compress(result)
    against = zstandard.ZstdCompressionDict(result, dict_type=_RAW)
    second = zstandard.ZstdCompressor(level=LEVEL, dict_data=against,
                                      write_checksum=True).compress(trace)
    sizes = {"packing": PACKING, "resultBytes": len(result), "traceBytes": len(trace),
             "resultFrameBytes": len(first)}
    return orjson.dumps(header | sizes) + _NEWLINE + first + second


def is_packed(raw: bytes) -> bool:
    """Whether ``raw`` has the packed form (a header line); else it is the JSON layout."""
    return raw.find(_NEWLINE) > 0  # (a plain value has none: one memchr over it)


def unpack(raw: bytes) -> tuple[dict[str, Any], bytes, PackedTrace] | None:
    """(the header, the result's bytes, the trace still packed), or None for anything else."""
    at = raw.find(_NEWLINE)
    try:
        header = orjson.loads(raw[:at])
    except orjson.JSONDecodeError:
        return None
    if not _sized(header):
        return None
    stream = raw[at + 1:]
    opened = _zstd(header, stream) if header["packing"] == PACKING else _zlib(header, stream)
    return None if opened is None else (header, opened[0], opened[1])


def _zstd(header: dict[str, Any], stream: bytes) -> tuple[bytes, PackedTrace] | None:
    split = header.get("resultFrameBytes")
    if type(split) is not int or not 0 < split <= len(stream):
        return None
    result = _opened(_plain(), stream[:split], header["resultBytes"], header["resultCrc32"])
    if result is None:
        return None
    return result, _ZstdTrace(result, stream[split:], header["traceBytes"], header["traceCrc32"])


def _opened(decompressor: zstandard.ZstdDecompressor, frame: bytes, size: int,
            crc32: int) -> bytes | None:
    """A frame's bytes when they are ``size`` long and check out: against the frame's own content
    checksum as they decompress when it carries one (every frame this version writes), else
    against ``crc32`` (a frame written before)."""
    try:
        params = zstandard.get_frame_parameters(frame)
        if params.content_size != size:
            return None
        data: bytes = decompressor.decompress(frame)
    except zstandard.ZstdError:
        return None
    return data if params.has_checksum or zlib.crc32(data) == crc32 else None


def _zlib(header: dict[str, Any], stream: bytes) -> tuple[bytes, PackedTrace] | None:
    inflater, size = zlib.decompressobj(), header["resultBytes"]
    try:
        result = inflater.decompress(stream, size) if size else b""
    except zlib.error:
        return None
    if len(result) != size or zlib.crc32(result) != header["resultCrc32"]:
        return None
    tail = inflater.unconsumed_tail if size else stream
    return result, _ZlibTrace(inflater, tail, header["traceBytes"], header["traceCrc32"])


def _sized(header: Any) -> bool:
    """A header object naming a known packing, both lengths (below 64 MiB: what a snapshot never
    reaches; zstd allocates a frame's declared size before decoding it) and both checksums as
    integers."""
    if not isinstance(header, dict) or header.get("packing") not in (PACKING, LEGACY):
        return False
    bounds = {"resultBytes": _MAX_BYTES, "traceBytes": _MAX_BYTES, "resultCrc32": 2**32,
              "traceCrc32": 2**32}
    return all(type(header.get(f)) is int and 0 <= header[f] < top for f, top in bounds.items())
