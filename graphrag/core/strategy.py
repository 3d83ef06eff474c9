"""The strategy registry: the one place the rest of the service learns what strategies exist.

A strategy is one module of this package that builds a :class:`Strategy` and is listed in
``graphrag.strategies.BUILT_IN`` (tests may :func:`register` more at run time). Everything outside
the module reads the registry: settings validate names against it, snapshot keys and the reader
ask it how a smaller tokenLimit is answered, the event resolver asks how far an edit's sibling
effect reaches, the fingerprint (``config_hash``) reads its version and parameters, and the CLI
lists its names. So adding a strategy is its module plus one line in that list
(docs/extending.md walks through it).

Invariants the registry keeps: names are unique plain words (they appear in Redis keys, so no ``:``,
``{`` or spaces); a registered strategy never changes (frozen); ``names()`` is in registration order,
built-ins first, so "the first strategy of a model" is stable.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from graphrag.core.errors import InvalidParameter

__all__ = ["LIMIT_MODES", "MODELS", "Strategy", "default", "get", "names", "register", "unregister"]

#: The graph models a strategy can need: the 2025 note tree, or 2026's folders and wiki links.
MODELS = ("tree", "wiki")
#: How a smaller tokenLimit is answered from one snapshot: ``prefix`` (slice the stored ranking),
#: ``per-limit`` (one snapshot per configured tokenLimit; others live), ``trace`` (replay a stored,
#: budget-independent trace).
LIMIT_MODES = ("prefix", "per-limit", "trace")
_NAME = re.compile(r"\A[a-z][a-z0-9-]{0,39}\Z")

LimitMode = Literal["prefix", "per-limit", "trace"]


@dataclass(frozen=True)
class Strategy:
    """What a strategy declares about itself.

    ``run(workspace, params, request)`` returns the computation generator (it yields the data it
    needs, then returns its outcome). ``params`` is the default parameter object: a frozen dataclass
    holding *every* constant that shapes a result (hashed into ``configHash`` with ``version``).
    ``sibling_radius`` is how many neighbours on each side of an edited note in its parent's order
    can change their picks because of it (the event resolver rebuilds them).
    """

    name: str
    version: int
    model: str
    limits: LimitMode
    params: Any
    run: Callable[[Any, Any, Any], Any]
    sibling_radius: int = 0
    description: str = ""
    #: the tokenLimit a read without one gets (and a ``trace`` snapshot stores ready); None: the
    #: configured maximum
    default_token_limit: int | None = None
    #: ``trace`` strategies: the least tokenLimit a stored trace answers, whatever the configured
    #: maximum (a larger maximum raises it); 0: the configured maximum alone
    least_traced_limit: int = 0

    def stored_limit(self, max_token_limit: int) -> int:
        """The largest tokenLimit a snapshot of this strategy answers under ``max_token_limit``
        (a trace's traversal limit)."""
        return max(max_token_limit, self.least_traced_limit)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"strategy name {self.name!r} must be a lower-case word (a-z, 0-9, -)")
        if self.model not in MODELS or self.limits not in LIMIT_MODES:
            raise ValueError(f"strategy {self.name!r}: unknown model or limit mode")
        if not dataclasses.is_dataclass(self.params) or isinstance(self.params, type):
            raise ValueError(f"strategy {self.name!r}: params must be a dataclass instance")


_REGISTRY: dict[str, Strategy] = {}


def register(strategy: Strategy) -> Strategy:
    """Add ``strategy``; a name is registered once (re-registering the same object is a no-op)."""
    known = _REGISTRY.get(strategy.name)
    if known is not None and known is not strategy:
        raise ValueError(f"strategy {strategy.name!r} is already registered")
    _REGISTRY[strategy.name] = strategy
    return strategy


def unregister(name: str) -> None:
    """Remove a strategy registered at run time (tests); unknown names are ignored."""
    _REGISTRY.pop(name, None)


def names(model: str | None = None) -> tuple[str, ...]:
    """Registered names in registration order, optionally only those of one graph model."""
    return tuple(s.name for s in _REGISTRY.values() if model is None or s.model == model)


def default(model: str) -> str:
    """The default strategy of graph ``model``: its first registered one (wavefront on the note
    tree, focus-context on the wiki model); an unknown or empty model is an
    :class:`InvalidParameter`."""
    found = names(model)
    if not found:
        raise InvalidParameter("strategy", f"no strategy for the graph model {model!r}")
    return found[0]


def get(name: str) -> Strategy:
    """The strategy called ``name``; an unknown name is an :class:`InvalidParameter`."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        choices = ", ".join(names())
        raise InvalidParameter("strategy", f"unknown strategy {name!r}; choose from {choices}") from None
