"""The built-in strategies, registered on import: adding a strategy is its module plus one entry here.

Order matters: the first registered strategy of a graph model is that model's default (wavefront on
the note tree, focus-context on the wiki model). See docs/extending.md.
"""

from __future__ import annotations

from graphrag.core.strategy import Strategy, register
from graphrag.tree import bfs, layered, wavefront
from graphrag.wiki.focus import strategy as focus_strategy

__all__ = ["BUILT_IN"]

BUILT_IN: tuple[Strategy, ...] = (
    wavefront.STRATEGY, layered.STRATEGY, bfs.STRATEGY,  # the 2025 note tree
    focus_strategy.STRATEGY,  # today's Doughnut: folders and wiki links
)

for _strategy in BUILT_IN:
    register(_strategy)
