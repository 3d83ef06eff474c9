"""The stored form of a snapshot: its key and its envelope (docs/redis.md, "Envelope").

A snapshot is keyed by (focus note, strategy, seed[, tokenLimit]) — :class:`SnapshotKey`; the
tokenLimit is part of the key only for strategies whose smaller tokenLimits are not answered from
one snapshot (the registry's ``per-limit`` mode). Its value is the orjson bytes of an
:class:`Envelope`, a documented layout a Java reader can parse; a trace snapshot's is packed
instead (a JSON header line, then zstd frames of the result and the trace: service.packing).

Reading the bytes back is service.decoding's (it never raises). The parsed result and trace
(:attr:`Envelope.result`, :attr:`Envelope.trace`) are built only when something needs them: a
slice or a replay to another tokenLimit, markdown, another viewer, the audit.
"""

from __future__ import annotations

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
from service.packing import PackedTrace, pack

__all__ = ["SCHEMA", "Envelope", "Fact", "SnapshotKey", "is_fresh", "key_limit", "shaped"]

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
        return shaped(result) and len(result["relatedNotes"]) == len(self.related_tokens)

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


def shaped(result: Any) -> bool:
    """Whether a parsed result has the shape of one: a focus note and a list of related notes."""
    return (isinstance(result, dict) and isinstance(result.get("focusNote"), dict)
            and isinstance(result.get("relatedNotes"), list))
