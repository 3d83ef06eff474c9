"""Snapshot store contract tests: the same suite against fakeredis and the real Redis."""
