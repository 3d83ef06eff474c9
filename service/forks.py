"""What a forked child must not inherit: a thread that does not run there, a socket its parent reads.

:func:`in_forked_child` has a method called in the child right after each fork (``os.register_at_fork``),
so that a process-local resource is made anew there on its next use, while the parent keeps its own.
The registration holds the method's object weakly: an object dropped meanwhile is not kept alive by
it, and nothing is called for it.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable

__all__ = ["in_forked_child"]


def in_forked_child(method: Callable[[], None]) -> None:
    """Call the bound ``method`` in every child forked from now on, while its object lives."""
    ref = weakref.WeakMethod(method)

    def call() -> None:
        bound = ref()
        if bound is not None:
            bound()

    os.register_at_fork(after_in_child=call)
