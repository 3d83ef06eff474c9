"""Reliability suites: sizes come from ``GRAPHRAG_RELIABILITY_SCALE`` (``ci`` default, ``full``).

The figures the suites observed (fuzzed requests, responses >= 500, compute times, memory) are
printed in the terminal summary.
"""

from __future__ import annotations

from typing import Any

from tests.reliability.support import FIGURES, scale


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section(f"reliability figures (scale {scale()})")
    for name, value in FIGURES.items():
        terminalreporter.write_line(f"{name}: {value}")
