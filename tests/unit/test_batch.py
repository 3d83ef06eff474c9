"""graphrag.core.batch: a job's own error is its result, and it holds nothing of the job."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Generator
from typing import Any

from graphrag.core.batch import run_batch
from graphrag.core.errors import NoteNotFound


class Workspace:
    def missing(self, need: Any) -> Any:
        return None


def _job(workspace: Workspace) -> Generator[Any, Any, Any]:
    yield ("note", 1)  # a need (one, so nothing is merged)
    raise NoteNotFound(1)


def test_a_jobs_error_is_its_result_without_the_frames_that_held_its_workspace() -> None:
    workspace = Workspace()
    results = run_batch({"a": _job(workspace)}, workspace, lambda need: None)
    assert isinstance(results["a"], NoteNotFound)
    assert results["a"].__traceback__ is None
    gone = weakref.ref(workspace)
    gc.disable()  # a reference cycle would keep it until the collector ran
    try:
        del workspace
        assert gone() is None
    finally:
        gc.enable()
