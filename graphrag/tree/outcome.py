"""A computed context: the focus, the picked notes with their costs, and its JSON.

Shared by every strategy: preparing the focus note (its row, contextual path and cost), costing a
related note, assembling the GraphRAGResult bytes, and slicing a result to a smaller tokenLimit.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from graphrag.core.errors import NoteNotFound
from graphrag.core.tokens import TokenCounter, adds_up_around_words
from graphrag.tree.model import Need, Relation, Row, Skeleton
from graphrag.tree.rand import u
from graphrag.tree.render import bare_note, dumps, focus_note
from graphrag.tree.view import GraphView

__all__ = [
    "Costing",
    "Focus",
    "Outcome",
    "Pick",
    "in_sibling_order",
    "outcome_by_labels",
    "prepare_focus",
    "slice_result",
]


@dataclass(frozen=True, slots=True)
class Focus:
    skeleton: Skeleton
    row: Row
    contextual_path: tuple[int, ...]
    tokens: int


@dataclass(frozen=True, slots=True)
class Pick:
    """A related note as emitted: its relation, compact JSON and token cost."""

    note_id: int
    relation: Relation
    json: bytes
    tokens: int


#: Where a BareNote's relation value starts: the member is never the first, and a title or
#: details holding these characters has its quotes escaped.
_RELATION_AT = b'"relationToFocusNote":"'


class Costing:
    """Renders and costs related notes once per (note, relation) for a whole workspace (a batch,
    or a full rebuild's piece).

    A note shown under several relations differs only in its ``relationToFocusNote`` value, so
    its JSON is rendered once, as the part before that value and the part after it, and the
    relation is put between them. With a counter whose counts add up around such a value
    (:func:`graphrag.core.tokens.adds_up_around_words`: tiktoken) the two parts are costed
    once per note and each relation's word once, so a note seen from many foci is encoded once;
    with any other counter the whole JSON is costed, as ever. Either way the bytes and the cost
    are those of the whole JSON.
    """

    def __init__(self, view: GraphView, counter: TokenCounter, truncate_bytes: int) -> None:
        self.view = view
        self.counter = counter
        self.truncate_bytes = truncate_bytes
        self._adds_up = adds_up_around_words(counter)
        self._memo: dict[tuple[int, Relation], Pick | None] = {}
        self._parts: dict[int, tuple[bytes, bytes, int]] = {}
        self._words: dict[Relation, int] = {}
        self._orders: dict[tuple[int, str, int], tuple[int, ...]] = {}
        self._positions: dict[int, dict[int, int]] = {}

    def pick(self, note_id: int, relation: Relation) -> Pick | None:
        """The rendered note, or None when it turned out absent or deleted (raises MissingData)."""
        key = (note_id, relation)
        if key not in self._memo:
            self._memo[key] = self._render(note_id, relation)
        return self._memo[key]

    def shuffled(self, seed: int, purpose: str, owner: int, ids: Sequence[int]) -> tuple[int, ...]:
        """``ids`` by ascending ``u(seed, purpose, id)``, memoised per (seed, purpose, owner)."""
        key = (seed, purpose, owner)
        if key not in self._orders:
            self._orders[key] = tuple(sorted(ids, key=lambda i: u(seed, purpose, i)))
        return self._orders[key]

    def child_positions(self, parent: int) -> dict[int, int]:
        """Child id -> its index in the parent's loaded children list, memoised per parent."""
        if parent not in self._positions:
            kids = self.view.children(parent)
            self._positions[parent] = {note_id: i for i, note_id in enumerate(kids)}
        return self._positions[parent]

    def _render(self, note_id: int, relation: Relation) -> Pick | None:
        row = self.view.row(note_id)
        if row is None or self.view.live(note_id) is None:
            return None
        head, tail, cost = self._parts.get(note_id) or self._split(row)
        data = b"%b%b%b" % (head, relation.value.encode(), tail)
        if not self._adds_up:
            return Pick(note_id, relation, data, self.counter.count(data))
        if relation not in self._words:
            self._words[relation] = self.counter.count(relation.value.encode())
        return Pick(note_id, relation, data, cost + self._words[relation])

    def _split(self, row: Row) -> tuple[bytes, bytes, int]:
        """The note's JSON before and after its relation value, and their costs added (when they
        add up)."""
        data = dumps(bare_note(row, Relation.SELF, truncate_bytes=self.truncate_bytes))
        cut = data.index(_RELATION_AT) + len(_RELATION_AT)
        head, tail = data[:cut], data[cut + len(Relation.SELF.value):]
        cost = self.counter.count(head) + self.counter.count(tail) if self._adds_up else 0
        self._parts[row.id] = (head, tail, cost)
        return head, tail, cost


def prepare_focus(view: GraphView, counter: TokenCounter, focus_id: int) -> Generator[Need, None, Focus]:
    """Load and cost the focus note: its FocusNote JSON with contextualPath, empty lists."""
    yield from view.ensure(Need(ancestors=frozenset({focus_id}), rows=frozenset({focus_id})))
    skeleton, row = view.live(focus_id), view.row(focus_id)
    if skeleton is None or row is None:
        raise NoteNotFound(focus_id)
    path = tuple(view.ancestors(focus_id))
    tokens = counter.count(dumps(focus_note(row, path)))
    return Focus(skeleton, row, path, tokens)


@dataclass(frozen=True)
class Outcome:
    """The result of one computation, before and after rendering."""

    focus: Focus
    picks: tuple[Pick, ...]
    children: tuple[int, ...] = ()
    prior_siblings: tuple[int, ...] = ()
    younger_siblings: tuple[int, ...] = ()
    inbound_references: tuple[int, ...] = ()

    def focus_json(self) -> dict[str, Any]:
        return focus_note(
            self.focus.row,
            self.focus.contextual_path,
            children=self.children,
            prior_siblings=self.prior_siblings,
            younger_siblings=self.younger_siblings,
            inbound_references=self.inbound_references,
        )

    def to_json(self) -> bytes:
        """The GraphRAGResult bytes; each related note's bytes are exactly what was costed."""
        related = b",".join(p.json for p in self.picks)
        return b'{"focusNote":' + dumps(self.focus_json()) + b',"relatedNotes":[' + related + b"]}"

    @property
    def related_tokens(self) -> tuple[int, ...]:
        return tuple(p.tokens for p in self.picks)

    def depends_on(self, view: GraphView) -> frozenset[int]:
        """Every note whose content this result shows: focus, related, their refs, the path."""
        shown: set[int] = {self.focus.skeleton.id, *self.focus.contextual_path}
        for note_id in (self.focus.skeleton.id, *(p.note_id for p in self.picks)):
            shown.add(note_id)
            row = view.row(note_id)
            if row is not None:
                shown.update(ref.id for ref in (row.parent, row.target) if ref is not None)
        return frozenset(shown)


def within_budget(tokens: Iterable[int], budget: int) -> int:
    """How many leading items fit into ``budget``: stop at the first that does not fit."""
    used = count = 0
    for cost in tokens:
        if used + cost > budget:
            break
        used += cost
        count += 1
    return count


def slice_result(
    result: dict[str, Any], focus_tokens: int, related_tokens: Sequence[int], token_limit: int
) -> dict[str, Any]:
    """The result a prefix-selecting strategy gives at a smaller ``token_limit``.

    Valid for wavefront-style results only: relatedNotes is cut to the leading notes that fit into
    ``token_limit - focus_tokens`` and the focus lists keep only URIs that are still present.
    """
    keep = within_budget(related_tokens, token_limit - focus_tokens)
    related = result["relatedNotes"][:keep]
    present = {note["uri"] for note in related}
    focus = dict(result["focusNote"])
    for key in ("children", "priorSiblings", "youngerSiblings", "inboundReferences"):
        focus[key] = [u for u in focus[key] if u in present]
    return {"focusNote": focus, "relatedNotes": related}


def in_sibling_order(view: GraphView, ids: Iterable[int]) -> tuple[int, ...]:
    """Live ``ids`` in Doughnut's sibling order (sibling_order, id)."""
    keys = {i: sk.order_key for i in ids if (sk := view.live(i)) is not None}
    return tuple(sorted(keys, key=keys.__getitem__))


def outcome_by_labels(focus: Focus, picks: tuple[Pick, ...], view: GraphView) -> Outcome:
    """The outcome of prefix-selecting strategies: focus lists hold the picks labelled Child and
    InboundReference (relatedNotes order) and Prior/YoungerSibling (sibling order)."""

    def having(label: Relation) -> list[int]:
        return [p.note_id for p in picks if p.relation is label]

    return Outcome(
        focus,
        picks,
        children=tuple(having(Relation.CHILD)),
        prior_siblings=in_sibling_order(view, having(Relation.PRIOR_SIBLING)),
        younger_siblings=in_sibling_order(view, having(Relation.YOUNGER_SIBLING)),
        inbound_references=tuple(having(Relation.INBOUND_REFERENCE)),
    )
