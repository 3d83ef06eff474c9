"""Graphs for the storage tests and loading them into a database (demo/test writes of a profile)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from storage.profiles import admin_2025
from storage.profiles.doughnut_2025 import Doughnut2025
from tests.support import DAY_MS, DELETED_AT, NOW_MS, Graph

__all__ = ["DELETED_AT", "all_uris", "hand_graph", "live_ids", "load_graph", "parse"]


def load_graph(store: Doughnut2025, graph: Graph) -> None:
    """Insert ``graph`` into the (existing) table of ``store``."""
    admin_2025.insert_notes(store.engine, graph.records())


def all_uris(value: Any) -> Iterator[str]:
    """Every URI anywhere in a parsed GraphRAGResult (uri fields and the focus's URI lists)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "uri" and isinstance(item, str):
                yield item
            else:
                yield from all_uris(item)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str) and item.startswith("/n"):
                yield item
            else:
                yield from all_uris(item)


def parse(data: bytes) -> dict[str, Any]:
    parsed = json.loads(data)
    assert isinstance(parsed, dict)
    assert set(parsed) == {"focusNote", "relatedNotes"}
    return parsed


# -- the hand-built graph -------------------------------------------------------------------------
DELETED = frozenset({50, 51, 52, 53})
DANGLING = (70, 71, 72)
CYCLIC = (80, 81, 82, 83, 84)
CHAIN = tuple(range(100, 230))  # 130 generations: more than one 64-hop ancestor round
SIBLING_PARENT = 300
#: children of SIBLING_PARENT -> sibling_order: equal, negative and huge (epoch-ms x 1000) values
SIBLING_ORDERS = {
    301: 5,
    302: -7,
    303: 5,
    304: 0,
    305: -7,
    306: 1_767_225_600_000_000,
    307: -1_767_225_600_000_000,
    308: 5,
}
SIBLINGS_IN_ORDER = (307, 302, 305, 304, 301, 303, 308, 306)

UNICODE_TITLES = {
    12: "猫 (ねこ) 貓",
    13: "🐕‍🦺 service dog 🐾",
    14: "כלב",
    15: "قطة عربية",
    16: "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𠜎𠜱 e\u0301",  # 4-byte letters, CJK ext. B, a combining accent
}
LONG_EMOJI_DETAILS = "🍩" * 37 + "ab" + "😀" * 10  # the 150-byte cut falls inside an emoji
LONG_CJK_DETAILS = "漢字" * 60 + " tail"
RTL_DETAILS = "שלום עולם, مرحبا بالعالم — mixed ltr/rtl 123"


def hand_graph() -> Graph:
    """A small notebook world with every shape the storage layer must carry faithfully."""
    g = Graph()
    day = DAY_MS

    def at(days_ago: int, seconds: int = 0) -> int:
        return NOW_MS - days_ago * day + seconds * 1000

    # Notebook A
    g.add(1, title="Doughnut 🍩 notebook", details="The root of notebook A.", created_at_ms=at(400))
    g.add(2, parent_id=1, sibling_order=10, title="Animals", created_at_ms=at(200, 17))
    g.add(3, parent_id=1, sibling_order=20, title="Plants", details="", created_at_ms=at(100))
    g.add(4, parent_id=1, sibling_order=20, title="Fungi", created_at_ms=at(3, 59))
    g.add(5, parent_id=1, sibling_order=-5, title="Minerals", created_at_ms=at(900))
    g.add(10, parent_id=2, sibling_order=3, title="Cat", details="x" * 300, created_at_ms=at(1))
    g.add(11, parent_id=2, sibling_order=3, title="Dog", details=LONG_EMOJI_DETAILS, created_at_ms=at(2))
    g.add(12, parent_id=2, sibling_order=-1, title=UNICODE_TITLES[12], details=None)
    g.add(13, parent_id=2, sibling_order=7, title=UNICODE_TITLES[13], details="y" * 150)
    g.add(14, parent_id=2, sibling_order=7, title=UNICODE_TITLES[14], details=RTL_DETAILS)
    g.add(15, parent_id=2, sibling_order=8, title=UNICODE_TITLES[15], details=LONG_CJK_DETAILS)
    g.add(16, parent_id=2, sibling_order=9, title=UNICODE_TITLES[16], details="z" * 151)
    for i, kid in enumerate(range(20, 25)):
        g.add(kid, parent_id=3, sibling_order=(i - 2) * 1000, created_at_ms=at(10 * i))
    for kid in range(30, 34):
        g.add(kid, parent_id=10, created_at_ms=at(kid))
    # link notes (reification): parent = subject, target = object
    g.add(40, parent_id=10, target_id=20, title=":eats")
    g.add(41, parent_id=11, target_id=10, title=":chases")
    g.add(42, parent_id=20, target_id=2, title=":is food for", details="link details")
    g.add(43, parent_id=30, target_id=10, title=":a part of")
    g.add(44, parent_id=13, target_id=10, title=":helps 🤝")
    g.add(45, parent_id=4, target_id=3, title=":grows among")
    # soft-deleted: a subtree, a link to it and a deleted inbound reference to Cat
    g.add(50, parent_id=2, title="Deleted animal", deleted=True)
    g.add(51, parent_id=50, title="Deleted descendant", deleted=True)
    g.add(52, parent_id=12, target_id=50, title=":deleted link", deleted=True)
    g.add(53, parent_id=21, target_id=10, title=":deleted inbound", deleted=True)
    g.add(54, parent_id=14, target_id=50, title=":points at a deleted note")  # live link
    g.add(55, parent_id=50, title="Live under a deleted parent")
    # Notebook B, with a cross-notebook reference to Cat
    g.add(60, title="Notebook B")
    for kid in range(61, 66):
        g.add(kid, parent_id=60, sibling_order=kid % 3)
    g.add(66, parent_id=61, target_id=10, title=":cites")
    # dangling ids: a parent and a target that do not exist
    g.add(70, parent_id=9999, title="Orphan with a dangling parent")
    g.add(71, parent_id=60, target_id=8888, title=":dangling target")
    g.add(72, parent_id=70, title="Child of the orphan")
    # parent cycles, a self-parent and a self-target
    g.add(80, parent_id=81, title="Cycle A")
    g.add(81, parent_id=80, title="Cycle B")
    g.add(82, parent_id=80, title="Hangs off the cycle")
    g.add(83, parent_id=83, title="Its own parent")
    g.add(84, parent_id=60, target_id=84, title=":its own target")
    # a long chain of generations
    for depth, nid in enumerate(CHAIN):
        g.add(nid, parent_id=nid - 1 if depth else None, title=f"gen {depth}")
    # siblings with equal, negative and huge orders
    g.add(SIBLING_PARENT, parent_id=60, title="Ordered siblings")
    for kid, order in SIBLING_ORDERS.items():
        g.add(kid, parent_id=SIBLING_PARENT, sibling_order=order)
    return g


def live_ids(graph: Graph) -> list[int]:
    return sorted(i for i, n in graph.notes.items() if not n.deleted)
