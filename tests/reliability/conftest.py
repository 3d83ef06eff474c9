"""Reliability suites: sizes come from ``GRAPHRAG_RELIABILITY_SCALE`` (``ci`` default, ``full``).

The figures the suites observed (fuzzed requests, responses >= 500, compute times, memory, stale
and missing snapshots) are printed in the terminal summary by :mod:`tests.reliability.figures`,
serial or parallel.
"""
