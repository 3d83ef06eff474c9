"""The stored form of a snapshot: its key and its envelope (docs/redis.md, "Envelope").

A snapshot is keyed by (focus note, strategy, seed[, tokenLimit]) — :class:`SnapshotKey`; the
tokenLimit is part of the key only for strategies whose smaller tokenLimits are not answered from
one snapshot (the registry's ``per-limit`` mode). Its value is the orjson bytes of an
:class:`Envelope`, a documented layout a Java reader can parse; a trace snapshot's is packed
instead (a JSON header line, then zstd frames of the result and the trace: service.packing).

Decoding never raises: missing, corrupt or foreign-schema bytes decode to None (a miss), so a bad
value in Redis costs one recomputation, never an error in front of a user.

A hit parses only the header. ``result`` is the last member and is served as the bytes it is
stored as; ``resultCrc32`` in the header is the CRC-32 of those bytes, so a value whose result was
cut, overwritten or garbled is still a miss without parsing 6 KB of JSON on the reader's hot path:
the bytes that match it are the bytes this service wrote, which were valid JSON. A trace snapshot's
``trace`` (tens of KB) is the member right before ``result`` and is kept as bytes the same way,
under ``traceCrc32`` (in a packed value: inflated, and checked, only when it is needed). The
parsed result and trace (:attr:`Envelope.result`, :attr:`Envelope.trace`)
are built only when something needs them: a slice or a replay to another tokenLimit, markdown,
another viewer, the audit. A value without ``resultCrc32`` (none is written any more) is parsed and
checked whole, as before.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import orjson

from graphrag import Request
from graphrag.core import strategy as registry
from graphrag.core.errors import InvalidParameter
from graphrag.tree.render import loads as loads_json
from graphrag.wiki.focus.strategy import WikiOutcome
from graphrag.wiki.focus.trace import Trace
from graphrag.wiki.model import Viewer
from service.packing import PackedTrace, is_packed, pack, unpack

__all__ = ["SCHEMA", "Envelope", "Fact", "SnapshotKey", "decode_envelope", "is_fresh", "key_limit"]

SCHEMA = 1
#: What a snapshot depends on, for the reverse index: a note id (the tree model: a note it shows),
#: or a wiki fact it read (``note:5``, ``links:5``, ``inbound:5``, ``peers:3:root``, ...).
Fact = int | str


def key_limit(strategy: str, token_limit: int) -> int | None:
    """The tokenLimit part of a snapshot key: set for per-limit strategies, None otherwise."""
    try:
        per_limit = registry.get(strategy).limits == "per-limit"
    except InvalidParameter:
        per_limit = False
    return token_limit if per_limit else None


@dataclass(frozen=True, slots=True)
class SnapshotKey:
    """Which snapshot: a focus note, a strategy, a seed and (per-limit strategies) a tokenLimit."""

    note_id: int
    strategy: str
    seed: int | None
    token_limit: int | None = None


class ReplayMemo(Protocol):
    """Answers replayed from stored traces, by the trace's :attr:`Envelope.trace_identity`, the
    tokenLimit and the format (service.reader.traces): what replaying the same trace bytes again
    would give."""

    def get(self, key: Hashable) -> object | None: ...

    def put(self, key: Hashable, answer: object, size: int) -> None: ...


@dataclass(frozen=True, eq=False)
class Envelope:
    """One stored snapshot. JSON names (camelCase) are the documented layout a Java reader parses.

    ``computed_at_ms`` is the wall clock of the computation (freshness), ``as_of_ms`` the ``now`` the
    recency score used; ``max_token_limit`` the tokenLimit it was computed at; ``focus_tokens`` and
    ``related_tokens`` (one per related note, in order) let a smaller tokenLimit be sliced from it.
    """

    note_id: int
    seed: int | None
    strategy: str
    generation: int
    computed_at_ms: int
    as_of_ms: int
    max_token_limit: int
    focus_tokens: int
    related_tokens: tuple[int, ...]
    depends_on: tuple[Fact, ...]
    config_hash: str
    #: The result's exact JSON bytes: what a read at ``max_token_limit`` is served, unparsed (they
    #: may hold a lone surrogate escape, which orjson would not write from a string)
    result_json: bytes = field(repr=False)
    schema: int = SCHEMA
    #: ``trace`` strategies: the stored bytes of the budget-independent trace every tokenLimit up
    #: to ``max_token_limit`` is replayed from (graphrag.wiki.focus.trace: its stored form, or
    #: its JSON form in a value written before), and the tokenLimit ``result`` was cut at
    trace_json: bytes | None = field(default=None, repr=False)
    result_limit: int | None = None
    #: a packed value's trace, still compressed (service.packing); ``trace_json`` is then None
    packed: PackedTrace | None = field(default=None, repr=False)
    #: the digest of the database it was computed from (service.binding): a reader serves only
    #: snapshots of its own database; "" for a process that checks no binding (tests, tools)
    database: str = ""
    #: ``trace`` strategies: whose view it holds (the trace's viewer), in the header so that a
    #: read naming its viewer (Doughnut's paths) decides without inflating the trace; None in a
    #: value written before, whose trace then says
    viewer: Viewer | None = None

    @property
    def traced(self) -> bool:
        """Whether it carries a trace (without inflating a packed one)."""
        return self.trace_json is not None or self.packed is not None

    @cached_property
    def trace_bytes(self) -> bytes | None:
        """The trace's stored bytes, decompressed the first time they are needed; None when there is no
        trace, or a packed one that does not inflate to the bytes its header names."""
        return self.packed.inflate() if self.packed is not None else self.trace_json

    @cached_property
    def trace(self) -> Trace | None:
        """The parsed trace, parsed the first time it is needed (a read at the stored tokenLimit
        by the owner never is): its first line, its notes as a replay reads them
        (graphrag.wiki.focus.trace). None when there is none or it does not parse as a trace
        (then no answer is replayed from it)."""
        if self.trace_bytes is None:
            return None
        try:
            return Trace.from_bytes(self.trace_bytes)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):  # (and orjson's)
            return None

    def as_decoded(self) -> Envelope:
        """A copy holding its fields only, as decoding its bytes gives it: none of what this one
        derived or was given since (the parsed result or trace, the inflated trace, the replays),
        whose memory other stores bound (service.reader.decoded)."""
        copy = object.__new__(Envelope)
        copy.__dict__.update({name: self.__dict__[name] for name in self.__dataclass_fields__})
        return copy

    @property
    def trace_identity(self) -> tuple[object, ...] | None:
        """What names a packed trace's bytes (the snapshot, when it was computed, and the trace's
        CRC-32): equal for two values read from the same stored bytes; None when not packed."""
        if self.packed is None:
            return None
        return (self.note_id, self.strategy, self.seed, self.generation, self.computed_at_ms,
                self.database, self.packed.trace_crc32)

    def adopt_trace(self, trace: Trace) -> None:
        """Hold ``trace`` as the parsed trace: one parsed before from bytes of the same
        :attr:`trace_identity` (service.reader.traces), so it is not inflated and parsed again."""
        self.__dict__["trace"] = trace

    def adopt_replays(self, replays: ReplayMemo,
                      identity: tuple[object, ...] | None = None) -> None:
        """Hold ``replays``: the answers the reader replayed before, among them those from bytes of
        the same :attr:`trace_identity` (service.reader.traces), consulted before the trace is.
        A view computed for one reader has no stored bytes: it is given an ``identity`` of its own,
        which no other value has (service.reader.viewer_reads)."""
        self.__dict__["replays"] = replays
        self.__dict__["replay_identity"] = identity if identity is not None else self.trace_identity

    @property
    def replay_identity(self) -> tuple[object, ...] | None:
        """What this value's answers are filed under among :attr:`replays` (None: not filed)."""
        held: tuple[object, ...] | None = self.__dict__.get("replay_identity")
        return held

    @property
    def replays(self) -> ReplayMemo | None:
        """The answers replayed before by the reader, if it keeps them (:attr:`trace_identity`
        names this value's among them)."""
        held: ReplayMemo | None = self.__dict__.get("replays")
        return held

    @property
    def parsed_trace(self) -> Trace | None:
        """The trace if it has been parsed (never parses it)."""
        held: Trace | None = self.__dict__.get("trace")
        return held

    def __eq__(self, other: object) -> bool:
        """Equal members, a packed trace compared by its inflated bytes."""
        if not isinstance(other, Envelope):
            return NotImplemented
        return self._members() == other._members()

    def __hash__(self) -> int:
        return hash((self.note_id, self.strategy, self.seed, self.generation, self.result_json))

    def _members(self) -> tuple[Any, ...]:
        fields = self.__dataclass_fields__
        return (*(getattr(self, f) for f in fields if f not in ("trace_json", "packed")),
                self.trace_bytes)

    @cached_property
    def result(self) -> dict[str, Any]:
        """The parsed result, parsed the first time it is needed (a full-limit hit never is)."""
        parsed: dict[str, Any] = loads_json(self.result_json)
        return parsed

    @property
    def sliceable(self) -> bool:
        """Whether a smaller tokenLimit can be cut from it: a well-formed result with one integer
        in ``related_tokens`` per related note (checked only when a slice is needed)."""
        try:
            result = self.result
        except ValueError:
            return False
        return _shaped(result) and len(result["relatedNotes"]) == len(self.related_tokens)

    @property
    def key(self) -> SnapshotKey:
        """Where this envelope is stored."""
        limit = key_limit(self.strategy, self.max_token_limit)
        return SnapshotKey(self.note_id, self.strategy, self.seed, limit)

    def to_json(self) -> dict[str, Any]:
        """The stored layout, parsed."""
        trace = {} if self.trace is None else {"trace": self.trace.to_json()}
        return self._header() | trace | {"result": self.result}

    def _header(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": self.schema, "noteId": self.note_id, "seed": self.seed,
            "strategy": self.strategy, "generation": self.generation,
            "computedAt": self.computed_at_ms, "asOf": self.as_of_ms,
            "maxTokenLimit": self.max_token_limit, "focusTokens": self.focus_tokens,
            "relatedTokens": list(self.related_tokens), "dependsOn": list(self.depends_on),
            "configHash": self.config_hash, "database": self.database,
            "resultCrc32": zlib.crc32(self.result_json),
        }
        if self.trace_bytes is not None:
            out |= {"resultTokenLimit": self.result_limit, "traceCrc32": zlib.crc32(self.trace_bytes)}
        if self.viewer is not None:
            out["viewer"] = self.viewer.to_json()
        return out

    def encode(self) -> bytes:
        """The stored bytes: orjson with the result's exact bytes embedded as they are; a trace
        snapshot packed (service.packing)."""
        header = self._header()
        if self.trace_bytes is not None:
            return pack(header, self.result_json, self.trace_bytes)
        return orjson.dumps(header | {"result": orjson.Fragment(self.result_json)})

    @classmethod
    def of(
        cls, outcome: Any, view: Any, request: Request, *, strategy: str, generation: int,
        computed_at_ms: int, config_hash: str, database: str = "",
    ) -> Envelope:
        """The envelope of a computed ``outcome`` (``view`` = the view it was computed from) of
        the database ``database`` names."""
        if isinstance(outcome, WikiOutcome):
            return cls._of_trace(outcome, request, strategy=strategy, generation=generation,
                                 computed_at_ms=computed_at_ms, config_hash=config_hash,
                                 database=database)
        return cls(
            note_id=request.focus_id, seed=request.seed, strategy=strategy, generation=generation,
            computed_at_ms=computed_at_ms, as_of_ms=request.now_ms,
            max_token_limit=request.token_limit, focus_tokens=outcome.focus.tokens,
            related_tokens=outcome.related_tokens, depends_on=tuple(sorted(outcome.depends_on(view))),
            config_hash=config_hash, result_json=outcome.to_json(), database=database,
        )

    @classmethod
    def _of_trace(cls, outcome: WikiOutcome, request: Request, *, strategy: str, generation: int,
                  computed_at_ms: int, config_hash: str, database: str) -> Envelope:
        return cls(
            note_id=request.focus_id, seed=request.seed, strategy=strategy, generation=generation,
            computed_at_ms=computed_at_ms, as_of_ms=request.now_ms,
            max_token_limit=request.sizing_limit, focus_tokens=0, related_tokens=(),
            depends_on=tuple(sorted(outcome.depends_on())), config_hash=config_hash,
            result_json=outcome.to_json(),
            trace_json=outcome.trace.to_bytes(), result_limit=request.token_limit,
            database=database, viewer=outcome.trace.viewer,
        )


def is_fresh(envelope: Envelope, now_ms: int, *, soft_ttl_s: int, config_hash: str) -> bool:
    """Within the soft TTL and computed under the running configuration."""
    return envelope.computed_at_ms + soft_ttl_s * 1000 > now_ms and envelope.config_hash == config_hash


_INT_FIELDS = ("noteId", "generation", "computedAt", "asOf", "maxTokenLimit", "focusTokens")
_INT_ONLY = frozenset({int})
#: lines each holding a colon (:func:`_facts`)
_FACT_LINES = re.compile(r"[^\n:]*:[^\n]*(?:\n[^\n:]*:[^\n]*)*")
def _ints(values: Any) -> bool:
    """Whether ``values`` is a list of plain ints (bools excluded); one C-level pass."""
    return isinstance(values, list) and set(map(type, values)) <= _INT_ONLY


def _facts(values: Any) -> bool:
    """Whether ``values`` is a list of note ids, or of wiki facts (``kind:...`` strings).

    Checked on every hit, so in two C-level passes: joining the list raises unless every member
    is text, and every line of the joined text holds a colon. A line is part of exactly one member,
    so a member without a colon leaves a line without one (a member holding a newline may be
    refused though it has a colon: no fact does)."""
    if not isinstance(values, list):
        return False
    if not values or type(values[0]) is not str:
        return _ints(values)
    try:
        joined = "\n".join(values)
    except TypeError:
        return False
    return _FACT_LINES.fullmatch(joined) is not None


def _traced(obj: dict[str, Any]) -> bool:
    """A trace, when present (parsed, or split off with its checksum), is an object with the
    tokenLimit its result was cut at."""
    if "trace" not in obj and "traceCrc32" not in obj:
        return True
    return type(obj.get("resultTokenLimit")) is int and isinstance(obj.get("trace", {}), dict)


def _valid_header(obj: Any) -> bool:
    """Every member but ``result`` has its documented type."""
    if not isinstance(obj, dict) or type(obj.get("schema")) is not int or obj["schema"] != SCHEMA:
        return False
    if not _ints([obj.get(k) for k in _INT_FIELDS]):
        return False
    if obj.get("seed") is not None and type(obj.get("seed")) is not int:
        return False
    if not (isinstance(obj.get("strategy"), str) and isinstance(obj.get("configHash"), str)):
        return False
    if not isinstance(obj.get("database", ""), str) or not _viewer_shaped(obj.get("viewer")):
        return False
    return _ints(obj.get("relatedTokens")) and _facts(obj.get("dependsOn")) and _traced(obj)


def _viewer_shaped(value: Any) -> bool:
    """Absent, or a viewer's JSON: ``{}``, ``{"userId": n}`` or ``{"circleId": n}``."""
    if value is None:
        return True
    if not isinstance(value, dict) or len(value) > 1 or not set(value) <= {"userId", "circleId"}:
        return False
    return _ints(list(value.values()))


def _shaped(result: Any) -> bool:
    return (isinstance(result, dict) and isinstance(result.get("focusNote"), dict)
            and isinstance(result.get("relatedNotes"), list))


def _valid_whole(obj: Any) -> bool:
    """A value without a checksum, parsed whole: its header and its result's shape."""
    if not _valid_header(obj) or not _shaped(result := obj.get("result")):
        return False
    return "trace" in obj or len(result["relatedNotes"]) == len(obj["relatedTokens"])


_RESULT_MARK, _TRACE_MARK = b',"result":', b',"trace":'
#: (the header as a JSON object of its own, the trace's bytes or None, the result's bytes)
Parts = tuple[bytes, bytes | None, bytes]


def _split(raw: bytes) -> Parts | None:
    """The parts of ``raw`` when ``result`` is its last member and ``trace``, if any, the one
    before (as this service writes them).

    Inside a JSON string a quote is escaped, so the bytes ``,"result":`` and ``,"trace":`` only
    ever appear as member names, and no object of the layout but the envelope has members called
    so: each occurs at most once, and searching from the start finds ``result`` after the header (a
    search from the end would cross the whole result: ten times slower on a 6 KB snapshot, on the
    reader's hot path).
    """
    at = raw.find(_RESULT_MARK)
    if at <= 0 or not raw.endswith(b"}"):
        return None
    result = raw[at + len(_RESULT_MARK) : -1]
    trace_at = raw.find(_TRACE_MARK, 0, at)
    if trace_at < 0:
        return raw[:at] + b"}", None, result
    return raw[:trace_at] + b"}", raw[trace_at + len(_TRACE_MARK) : at], result


def _parsed(data: bytes) -> Any:
    try:
        return loads_json(data)
    except (ValueError, TypeError):  # orjson's and the standard library's decode errors
        return None


def _matches(data: bytes | None, crc: Any) -> bool:
    """Whether ``data`` is absent and has no checksum, or is there and matches it."""
    if data is None:
        return crc is None
    return type(crc) is int and zlib.crc32(data) == crc


def _checked(raw: bytes) -> tuple[dict[str, Any], bytes | None, bytes] | None:
    """The header and the trace's and result's bytes, if the header is valid and the trace and the
    result are the ones it names: by their checksums, or (none) by parsing the whole value."""
    parts = _split(raw)
    if parts is None or not isinstance(header := _parsed(parts[0]), dict):
        return None
    if "resultCrc32" not in header:
        return _whole(raw, parts)
    _, trace_json, result_json = parts
    if not (_valid_header(header) and _matches(trace_json, header.get("traceCrc32"))):
        return None
    return (header, trace_json, result_json) if _matches(result_json, header["resultCrc32"]) else None


def _whole(raw: bytes, parts: Parts) -> tuple[dict[str, Any], bytes | None, bytes] | None:
    """A value without checksums, parsed and checked whole."""
    if not _valid_whole(obj := _parsed(raw)):
        return None
    try:
        trace_json = orjson.dumps(obj["trace"]) if "trace" in obj else None
    except TypeError:  # a lone surrogate the standard library read: not a trace this service wrote
        return None
    return obj, trace_json, parts[2]


def decode_envelope(data: bytes | str | None) -> Envelope | None:
    """The envelope in ``data``, or None for missing, corrupt or foreign-schema bytes. Never raises."""
    if data is None:
        return None
    try:
        raw = data.encode() if isinstance(data, str) else data
    except UnicodeEncodeError:
        return None
    return _unpacked(raw) if is_packed(raw) else _plain(raw)


def _unpacked(raw: bytes) -> Envelope | None:
    """A packed trace snapshot: its result inflated and checked, its trace left packed."""
    unpacked = unpack(raw)
    if unpacked is None or not _valid_header(unpacked[0]):
        return None
    header, result_json, packed = unpacked
    return _envelope(header, result_json, None, packed)


def _plain(raw: bytes) -> Envelope | None:
    checked = _checked(raw)
    if checked is None:
        return None
    obj, trace_json, result_json = checked
    return _envelope(obj, result_json, trace_json, None)


def _envelope(obj: dict[str, Any], result_json: bytes, trace_json: bytes | None,
              packed: PackedTrace | None) -> Envelope:
    return Envelope(
        note_id=obj["noteId"], seed=obj["seed"], strategy=obj["strategy"],
        generation=obj["generation"], computed_at_ms=obj["computedAt"], as_of_ms=obj["asOf"],
        max_token_limit=obj["maxTokenLimit"], focus_tokens=obj["focusTokens"],
        related_tokens=tuple(obj["relatedTokens"]), depends_on=tuple(obj["dependsOn"]),
        config_hash=obj["configHash"], result_json=result_json, trace_json=trace_json,
        result_limit=obj.get("resultTokenLimit"), packed=packed, database=obj.get("database", ""),
        viewer=_viewer(obj.get("viewer")),
    )


def _viewer(value: Any) -> Viewer | None:
    """The header's ``viewer`` (checked by :func:`_valid_header`), None when it has none."""
    return None if value is None else Viewer.from_json(value)
