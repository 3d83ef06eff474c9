"""The figures the suites observed, printed in the terminal summary (a plugin the root conftest
registers, so the controller of a parallel run has it too).

Under pytest-xdist every test runs in a worker process, whose :data:`FIGURES` the controller never
sees: each worker hands its figures over when it finishes (``workeroutput``), and the controller
adds them up before the summary, so a parallel run prints what a serial one does (the stale and
missing counts of the reliability suites above all).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.reliability.support import FIGURES, scale

_KEY = "graphrag_figures"


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # an xdist worker: hand the figures to the controller
        output[_KEY] = json.dumps(FIGURES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    FIGURES.update(json.loads(getattr(node, "workeroutput", {}).get(_KEY, "{}")))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section(f"reliability figures (scale {scale()})")
    for name, value in sorted(FIGURES.items()):
        terminalreporter.write_line(f"{name}: {value}")
