"""What a read asks for, and the bytes that answer it: the reader's pure half.

An :class:`Ask` is a validated read (note, strategy, seed, tokenLimit, viewer, format) and knows
which stored snapshot, if any, can answer it (:attr:`Ask.key`): a prefix strategy's snapshot at the
maximum tokenLimit (smaller ones are sliced), a per-limit strategy's snapshot at exactly a configured
limit, a trace strategy's snapshot for the seedless order or a configured seed (any tokenLimit up to
the maximum is replayed from its trace) when the read names no other viewer than the snapshot's.
Everything else is computed live and never stored.

:func:`envelope_body` and :func:`outcome_body` produce the answer's bytes: Doughnut's result JSON,
or for ``markdown`` the text (the tree strategies' layout of :mod:`graphrag.tree.markdown`, or Doughnut
2026's markdown) together with its ``{"markdown": ...}`` JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

from graphrag import InvalidParameter, check_note_id, get_strategy, slice_result
from graphrag.core.params import MAX_TOKEN_LIMIT_CEILING
from graphrag.tree.markdown import graph_markdown
from graphrag.wiki.focus.render import markdown_json
from graphrag.wiki.focus.strategy import WikiOutcome, replay, replay_json, shared_limit
from graphrag.wiki.model import Viewer
from service.envelope import Envelope, SnapshotKey, key_limit

__all__ = [
    "FORMATS", "Answer", "Ask", "envelope_body", "kept_answer", "outcome_body", "parse_ask", "ready",
]

FORMATS = ("json", "markdown")
Format = Literal["json", "markdown"]
_JAVA_LONG = 2**63


@dataclass(frozen=True, slots=True)
class Answer:
    """The bytes of one answer: the result JSON, or the markdown text and its JSON wrapping."""

    body: bytes
    text: str | None = None


@dataclass(frozen=True, slots=True)
class Ask:
    note_id: int
    strategy: str
    seed: int | None
    token_limit: int
    viewer: Viewer | None
    fmt: Format
    stored_limit: int | None  # the tokenLimit of the snapshot that can answer; None: live only
    read_deleted: bool = False  # a deleted focus is computed like a live one (Doughnut's paths)

    @property
    def key(self) -> SnapshotKey:
        limit = None if self.stored_limit is None else key_limit(self.strategy, self.stored_limit)
        return SnapshotKey(self.note_id, self.strategy, self.seed, limit)

    @property
    def traced(self) -> bool:
        return get_strategy(self.strategy).limits == "trace"


def _int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameter(name, "must be an integer")
    return value


def _token_limit(value: int | None, strategy: str, maximum: int, least: int, most: int) -> int:
    default = get_strategy(strategy).default_token_limit or maximum
    limit = default if value is None else value
    if isinstance(limit, bool) or not isinstance(limit, int) or not least <= limit <= most:
        raise InvalidParameter("tokenLimit", f"must be an integer from {least} to {most}")
    return limit


def _seed(value: int | None, traced: bool, seeds: tuple[int, ...]) -> int | None:
    """Tree strategies: a configured seed (None: the caller picks one). Trace strategies: None is
    the seedless order and any Java long is allowed (an unconfigured one is computed live)."""
    if value is None:
        return None
    seed = _int(value, "seed")
    if traced and not -_JAVA_LONG <= seed < _JAVA_LONG:
        raise InvalidParameter("seed", "must fit a 64-bit integer")
    if not traced and seed not in seeds:
        raise InvalidParameter("seed", f"unknown seed {seed}; configured seeds are {seeds}")
    return seed


def parse_ask(note_id: int, *, strategy: str, token_limit: int | None, seed: int | None,
              viewer: Viewer | None, fmt: str, seeds: tuple[int, ...], max_token_limit: int,
              least_token_limit: int = 1, most_token_limit: int = MAX_TOKEN_LIMIT_CEILING) -> Ask:
    """Validate one read (InvalidParameter names the parameter); ``stored_limit`` left unset.
    ``least_token_limit`` 0 and ``most_token_limit`` JAVA_INT_MAX take every tokenLimit of
    Doughnut's own paths (0: an empty focus body; any int: all the walk finds)."""
    check_note_id(note_id)
    limit = _token_limit(token_limit, strategy, max_token_limit, least_token_limit,
                         most_token_limit)
    traced = get_strategy(strategy).limits == "trace"
    chosen = _seed(seed, traced, seeds)
    if viewer is not None and not traced:
        raise InvalidParameter("viewer", f"strategy {strategy!r} has no viewer (the note tree)")
    if fmt not in FORMATS:
        raise InvalidParameter("format", f"must be one of {', '.join(FORMATS)}")
    return Ask(note_id, strategy, chosen, limit, viewer, fmt, None)  # type: ignore[arg-type]


def _markdown(text: str) -> Answer:
    return Answer(markdown_json(text), text)


def outcome_body(outcome: Any, ask: Ask) -> Answer:
    """The answer from a freshly computed outcome (already at the asked tokenLimit)."""
    if isinstance(outcome, WikiOutcome):
        return _markdown(outcome.markdown()) if ask.fmt == "markdown" else Answer(outcome.to_json())
    json = outcome.to_json()
    return _tree_markdown(json, ask.strategy) if ask.fmt == "markdown" else Answer(json)


def _tree_markdown(json: bytes, strategy: str) -> Answer:
    return _markdown(graph_markdown(orjson.loads(json), strategy=strategy))


def envelope_body(envelope: Envelope, ask: Ask) -> Answer:
    """The answer from a stored snapshot: its ready bytes, a prefix slice or a replayed cut."""
    mode = get_strategy(envelope.strategy).limits
    if mode == "trace":
        return _traced_body(envelope, ask)
    if mode == "prefix" and ask.token_limit < envelope.max_token_limit:
        json = orjson.dumps(slice_result(envelope.result, envelope.focus_tokens,
                                         envelope.related_tokens, ask.token_limit))
    else:
        json = envelope.result_json
    return _tree_markdown(json, ask.strategy) if ask.fmt == "markdown" else Answer(json)


def ready(envelope: Envelope, ask: Ask) -> bool:
    """Whether a trace snapshot answers ``ask`` with its stored result, not a replay of its trace."""
    return ask.fmt == "json" and ask.token_limit == envelope.result_limit


def kept_answer(envelope: Envelope, ask: Ask) -> Answer | None:
    """The answer to ``ask`` replayed before from this value's trace bytes, if the reader kept it
    (Envelope.replays): what a replay now would give, without inflating or parsing the trace."""
    memo, key = envelope.replays, _replay_key(envelope, ask)
    kept = None if memo is None or key is None else memo.get(key)
    return kept if isinstance(kept, Answer) else None


def _replay_key(envelope: Envelope, ask: Ask) -> tuple[object, ...] | None:
    """What an answer to ``ask`` from ``envelope`` is kept under (None: the value is not filed)."""
    identity = envelope.replay_identity
    return None if identity is None else (identity, ask.token_limit, ask.fmt)


def _traced_body(envelope: Envelope, ask: Ask) -> Answer:
    """The stored result, a kept answer or a replay, looked up at the least limit that gives the
    same answer (graphrag.wiki.focus.cut.full_limit: every limit from it on shows the whole
    trace), so that one answer serves all of them, the stored one included. A trace not parsed
    yet is asked for an answer kept at the very limit first (it may then never be parsed); a
    parsed one gives the limit at once, so a read looks one answer up."""
    if ready(envelope, ask):
        return Answer(envelope.result_json)
    if envelope.parsed_trace is None:
        kept = kept_answer(envelope, ask)
        if kept is not None:
            return kept
    trace, stored = envelope.trace, envelope.result_limit
    assert trace is not None
    limit = shared_limit(trace, ask.token_limit)
    if ask.fmt == "json" and stored is not None and shared_limit(trace, stored) == limit:
        return Answer(envelope.result_json)
    shared = ask if limit == ask.token_limit else replace(ask, token_limit=limit)
    kept = kept_answer(envelope, shared)
    return kept if kept is not None else _kept(envelope, shared, _replayed(envelope, shared))


def _kept(envelope: Envelope, ask: Ask, answer: Answer) -> Answer:
    memo, key = envelope.replays, _replay_key(envelope, ask)
    if memo is not None and key is not None:
        memo.put(key, answer, len(answer.body) + 2 * len(answer.text or ""))
    return answer


def _replayed(envelope: Envelope, ask: Ask) -> Answer:
    assert envelope.trace is not None
    if ask.fmt == "json":
        return Answer(replay_json(envelope.trace, ask.token_limit))
    return outcome_body(replay(envelope.trace, ask.token_limit), ask)


def trace_viewer(envelope: Envelope) -> Viewer | None:
    """Whose view a trace snapshot holds (its focus notebook's owner): its header says, without
    inflating the trace; a value written before says it only in its trace."""
    if envelope.viewer is not None:
        return envelope.viewer
    return None if envelope.trace is None else envelope.trace.viewer
