"""Parameters of a computation: the request, each strategy's knobs, and their fingerprint.

Everything that shapes a result is here and is hashed into ``config_hash`` so that a snapshot computed
under other settings is never served as fresh (DESIGN §4).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import orjson

from graphrag.errors import InvalidParameter

__all__ = [
    "STRATEGIES",
    "BfsParams",
    "LayeredParams",
    "Request",
    "StrategyParams",
    "WavefrontParams",
    "config_hash",
]

STRATEGIES = ("wavefront", "layered", "relationship-bfs")
MAX_TOKEN_LIMIT_CEILING = 1_000_000  # above this a tokenLimit is a mistake, not a budget
MAX_NOTE_ID = 2**32 - 1  # Doughnut's note.id is int unsigned


@dataclass(frozen=True, slots=True)
class Request:
    """One focus note's computation.

    ``token_limit`` is Doughnut's tokenLimit (focus included). ``traversal_token_limit`` is the budget
    the wavefront's discovery is sized for (the configured maximum), so that every smaller tokenLimit
    selects a prefix of the same ranking; it defaults to ``token_limit``. ``now_ms`` is the clock the
    recency score reads (epoch milliseconds, UTC).
    """

    focus_id: int
    seed: int
    token_limit: int
    now_ms: int
    traversal_token_limit: int | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.focus_id <= MAX_NOTE_ID:
            raise InvalidParameter("noteId", f"must be an integer from 0 to {MAX_NOTE_ID}")
        if not 0 <= self.token_limit <= MAX_TOKEN_LIMIT_CEILING:
            raise InvalidParameter("tokenLimit", f"must be between 0 and {MAX_TOKEN_LIMIT_CEILING}")

    @property
    def sizing_limit(self) -> int:
        return max(self.token_limit, self.traversal_token_limit or 0)


@dataclass(frozen=True, slots=True)
class WavefrontParams:
    """seed-000 §11 knobs with DESIGN §2 defaults."""

    max_depth: int = 3
    max_total_candidates: int = 200
    child_cap_multiplier: int = 2
    inbound_cap_multiplier: int = 2
    w_relationship: float = 100.0
    w_depth: float = 20.0
    w_recency: float = 5.0
    jitter_range: float = 0.5
    safety_margin: float = 1.2


@dataclass(frozen=True, slots=True)
class LayeredParams:
    """seed-001 / CONTRACT §4: notes before switching, per layer."""

    notes_before_switching: tuple[int, int, int, int] = (3, 3, 2, 2)


@dataclass(frozen=True, slots=True)
class BfsParams:
    """seed-003 / DESIGN §2b: the number of waves."""

    max_depth: int = 5


@dataclass(frozen=True, slots=True)
class StrategyParams:
    """All strategies' knobs plus the rendering choices that change bytes."""

    wavefront: WavefrontParams = WavefrontParams()
    layered: LayeredParams = LayeredParams()
    bfs: BfsParams = BfsParams()
    details_truncate_bytes: int = 150


def config_hash(params: StrategyParams, counter_name: str) -> str:
    """A short, stable fingerprint of everything that shapes a result."""
    payload = orjson.dumps(
        {"params": dataclasses.asdict(params), "counter": counter_name},
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.sha256(payload).hexdigest()[:16]
