"""Parameters, requests, results and errors of the focus-context strategy (Doughnut 2026).

Every constant that shapes a result is a field of :class:`FocusContextParams`, at the values of
Doughnut's ``FocusContextConstants`` (commit b2c0268c09). The wiki share is kept as the exact fraction
3/4: Java computes ``(int) Math.floor(R * 0.75)`` for an ``int`` R; ``R * 0.75`` needs at most 33
significant bits, so the double product is exact and its floor is ``3R // 4`` for every ``int`` R.

The result classes mirror Doughnut's DTOs ``FocusContextResult``, ``FocusContextFocusNote`` and
``FocusContextNote`` field for field, in declaration order (which is also their JSON order).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

from graphrag.core.errors import Forbidden, GraphRagError, InvalidParameter
from graphrag.wiki.model import Viewer

__all__ = [
    "FocusContextParams",
    "FocusContextResult",
    "FocusNoteOut",
    "FocusRequest",
    "NoteNotReadable",
    "RelatedNoteOut",
    "TraceTooSmall",
]

_JAVA_LONG = 2**63


@dataclass(frozen=True)
class FocusContextParams:
    """The constants of Doughnut's FocusContext; ``dedupe_across_depths`` is ours (off = Doughnut)."""

    max_depth: int = 2
    focus_content_cap: int = 1500
    related_content_cap: int = 200
    default_budget: int = 2000
    top_sample_cap: int = 6
    sample_cap_divisor: int = 3
    focus_inbound_uri_cap: int = 20
    peer_gate: int = 100
    wiki_share_numerator: int = 3
    wiki_share_denominator: int = 4
    dedupe_across_depths: bool = False
    version: int = 1

    def sample_cap(self, depth: int) -> int:
        """``sampleCapAtGraphDepth``: the top cap divided by the divisor once per depth below ``depth``
        (6, 2, 0, 0, ...)."""
        cap = self.top_sample_cap
        for _ in range(1, depth):
            cap //= self.sample_cap_divisor
        return cap

    def wiki_budget(self, related: int) -> int:
        """The wiki share of a post-focus remainder of ``related`` tokens, rounded down."""
        return related * self.wiki_share_numerator // self.wiki_share_denominator

    def to_json(self) -> dict[str, Any]:
        """The members as a new dict (copied from one conversion per instance: every trace writes
        its parameters)."""
        return dict(self._members)

    @cached_property
    def _members(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> FocusContextParams:
        return FocusContextParams(**data)


@dataclass(frozen=True)
class FocusRequest:
    """One focus-context computation.

    ``token_limit`` is Doughnut's combined content budget; ``max_token_limit`` (default: the same)
    sizes the traversal, so that one trace answers every budget up to it. ``viewer`` None means the
    owner of the focus notebook; ``max_depth`` None means the parameters' depth.
    """

    focus_id: int
    seed: int | None = None
    token_limit: int = 2000
    max_token_limit: int | None = None
    viewer: Viewer | None = None
    max_depth: int | None = None
    #: a deleted focus is traced like a live one (Doughnut's API does; snapshots never are)
    read_deleted: bool = False

    def __post_init__(self) -> None:
        if self.max_token_limit is not None and self.max_token_limit < self.token_limit:
            raise InvalidParameter("max_token_limit", "must be at least token_limit")
        if self.seed is not None and not -_JAVA_LONG <= self.seed < _JAVA_LONG:
            raise InvalidParameter("seed", "must fit a Java long")

    @property
    def sizing_limit(self) -> int:
        return self.token_limit if self.max_token_limit is None else self.max_token_limit

    def depth(self, params: FocusContextParams) -> int:
        return params.max_depth if self.max_depth is None else self.max_depth


@dataclass(frozen=True)
class FocusNoteOut:
    """``FocusContextFocusNote``. ``notebook`` None and ``content`` None are omitted in JSON."""

    notebook: str | None
    title: str
    folder_path: str
    depth: int
    outgoing_links: tuple[str, ...]
    inbound_references: tuple[str, ...]
    sample_siblings: tuple[str, ...]
    created_at_ms: int
    content: str | None
    content_truncated: bool


@dataclass(frozen=True)
class RelatedNoteOut:
    """``FocusContextNote``: a wiki-reached note (path ends at it) or a folder peer (path ends at
    its anchor)."""

    notebook: str | None
    title: str
    folder_path: str
    depth: int
    retrieval_path: tuple[str, ...]
    created_at_ms: int
    content: str | None
    content_truncated: bool


@dataclass(frozen=True)
class FocusContextResult:
    """``FocusContextResult``: the focus note and the related notes in emission order."""

    focus_note: FocusNoteOut
    related_notes: tuple[RelatedNoteOut, ...]


class NoteNotReadable(Forbidden):
    """The viewer may not read the focus note's notebook (Doughnut answers "no access")."""

    def __init__(self, viewer: Viewer | None, note_id: int) -> None:
        if viewer is None:
            message = f"no viewer may read note {note_id}: it has no notebook"
        elif viewer.user_id is not None:
            message = f"viewer {viewer.user_id} may not read note {note_id}"
        elif viewer.anonymous:
            message = f"only a logged-in user may read note {note_id}: it is not in the bazaar"
        else:
            message = f"circle {viewer.circle_id} may not read note {note_id}"
        super().__init__(message)
        self.viewer = viewer
        self.note_id = note_id


class TraceTooSmall(GraphRagError):
    """A trace was cut at a budget it was not sized for (a bug or a token_limit above its size)."""
