"""Parameters of a computation: the request, the tuning of each strategy, and their fingerprint.

``config_hash`` promises that a snapshot computed under other settings is never served as fresh
(docs/redis.md, "Envelope"). It therefore covers everything that shapes a result: the strategy's
name and algorithm ``version`` (bumped whenever its code changes what it returns), every field of its
parameter object (weights, bonuses, decay, caps: the strategies keep no result-shaping constant
outside it), the rendering choices (details truncation) and the token counter. A test changes each
field and sees the hash change.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from graphrag.core import strategy as registry
from graphrag.core.errors import InvalidParameter

__all__ = [
    "JAVA_INT_MAX",
    "MAX_NOTE_ID",
    "MAX_TOKEN_LIMIT_CEILING",
    "Request",
    "StrategyParams",
    "check_note_id",
    "config_hash",
]

#: the service's own paths and commands: above this a tokenLimit is a mistake, not a budget
MAX_TOKEN_LIMIT_CEILING = 1_000_000
#: Doughnut's own paths take any Java ``int`` as tokenLimit (its walk is bounded by depth, not by
#: the budget): the largest a computation accepts
JAVA_INT_MAX = 2**31 - 1
MAX_NOTE_ID = 2**32 - 1  # Doughnut's note.id is int unsigned


def check_note_id(value: object, parameter: str = "noteId") -> int:
    """``value`` as a note id (an int from 0 to 2^32-1, never a bool), else InvalidParameter."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_NOTE_ID:
        raise InvalidParameter(parameter, f"must be an integer from 0 to {MAX_NOTE_ID}")
    return value


@dataclass(frozen=True, slots=True)
class Request:
    """One focus note's computation.

    ``token_limit`` is Doughnut's tokenLimit (focus included). ``traversal_token_limit`` is the budget
    the traversal is sized for (the configured maximum), so that every smaller tokenLimit selects
    a prefix of the same ranking; it defaults to ``token_limit``. ``now_ms`` is the clock the
    recency score reads (epoch milliseconds, UTC). ``seed`` None is the seedless order of the wiki
    model (the tree strategies always get an integer seed).
    """

    focus_id: int
    seed: int | None
    token_limit: int
    now_ms: int
    traversal_token_limit: int | None = None
    #: whose view (wiki model): a ``graphrag.wiki.model.Viewer``; None = the focus notebook's owner
    viewer: Any = None
    #: traversal depth (wiki model); None = the strategy's parameters
    max_depth: int | None = None
    #: a deleted focus is computed like a live one (wiki model: Doughnut's own API reads it so)
    read_deleted: bool = False

    def __post_init__(self) -> None:
        check_note_id(self.focus_id)
        if not 0 <= self.token_limit <= JAVA_INT_MAX:
            raise InvalidParameter("tokenLimit", f"must be between 0 and {JAVA_INT_MAX}")

    @property
    def sizing_limit(self) -> int:
        return max(self.token_limit, self.traversal_token_limit or 0)

    @property
    def int_seed(self) -> int:
        """The seed of the tree strategies' randomness; a missing seed samples as seed 0."""
        return 0 if self.seed is None else self.seed


class StrategyParams:
    """The tuning in force: per-strategy parameter overrides plus the rendering choices.

    ``StrategyParams(wavefront=WavefrontParams(jitter_range=0))`` overrides one strategy (keyword =
    strategy name with ``-`` written ``_``); every other strategy uses its registered defaults.
    Immutable and hashable, so it can key memos and be shared across threads.
    """

    __slots__ = ("_overrides", "details_truncate_bytes")

    def __init__(self, *, details_truncate_bytes: int = 150, **overrides: Any) -> None:
        for value in overrides.values():
            if not dataclasses.is_dataclass(value) or isinstance(value, type):
                raise TypeError("strategy parameters must be dataclass instances")
        self._overrides: tuple[tuple[str, Any], ...] = tuple(
            sorted((name.replace("_", "-"), value) for name, value in overrides.items())
        )
        self.details_truncate_bytes = details_truncate_bytes

    def of(self, strategy: str) -> Any:
        """The parameter object of ``strategy``: the override, else the registered default."""
        return dict(self._overrides).get(strategy) or registry.get(strategy).params

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StrategyParams) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[object, ...]:
        return (self._overrides, self.details_truncate_bytes)

    def __repr__(self) -> str:
        parts = [f"{name}={value!r}" for name, value in self._overrides]
        parts.append(f"details_truncate_bytes={self.details_truncate_bytes}")
        return f"StrategyParams({', '.join(parts)})"


def _plain(value: Any) -> Any:
    """Dataclasses, mappings and tuples as JSON-able values (mapping keys as strings)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def config_hash(strategy: str, params: StrategyParams, counter_name: str) -> str:
    """A short, stable fingerprint of everything that shapes ``strategy``'s results."""
    spec = registry.get(strategy)
    payload = orjson.dumps(
        {
            "strategy": spec.name, "version": spec.version, "model": spec.model,
            "params": _plain(params.of(strategy)),
            "detailsTruncateBytes": params.details_truncate_bytes, "counter": counter_name,
        },
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.sha256(payload).hexdigest()[:16]
