"""Auditing snapshots: recompute a sample live and report how many are stale (DESIGN §5).

Each sampled snapshot is recomputed with its own strategy, seed, tokenLimit and ``asOf`` time, so any
difference is content that changed since it was computed (or drift the events do not cover), never
the clock. A snapshot of a note that is now deleted counts as stale.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

import orjson

from graphrag import GraphRagError, NoteNotFound, Request
from storage.context import ContextService
from storage.snapshots import Envelope, SnapshotStore

__all__ = ["AuditReport", "Finding", "audit"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One stale snapshot: how many related notes differ, and how old it is."""

    note_id: int
    strategy: str
    seed: int
    differing_notes: int
    age_s: float
    reason: str


@dataclass(frozen=True)
class AuditReport:
    sampled: int
    stale: int
    worst: tuple[Finding, ...]

    @property
    def stale_fraction(self) -> float:
        return self.stale / self.sampled if self.sampled else 0.0

    def to_json(self) -> dict[str, object]:
        return {"sampled": self.sampled, "stale": self.stale,
                "staleFraction": round(self.stale_fraction, 4),
                "worst": [_finding(f) for f in self.worst]}


def _finding(f: Finding) -> dict[str, object]:
    return {"noteId": f.note_id, "strategy": f.strategy, "seed": f.seed,
            "differingNotes": f.differing_notes, "ageSeconds": round(f.age_s, 1), "reason": f.reason}


def _uris(result: dict[str, object]) -> set[str]:
    related = result.get("relatedNotes", [])
    return {n["uri"] for n in related if isinstance(n, dict)} if isinstance(related, list) else set()


def _compare(env: Envelope, live: bytes | None, now_ms: int) -> Finding | None:
    stored = orjson.dumps(env.result)
    age_s = (now_ms - env.computed_at_ms) / 1000
    if live is None:
        return Finding(env.note_id, env.strategy, env.seed, len(_uris(env.result)), age_s,
                       "focus note deleted or gone")
    if live == stored:
        return None
    differing = len(_uris(env.result) ^ _uris(orjson.loads(live)))
    reason = "related notes differ" if differing else "content differs"
    return Finding(env.note_id, env.strategy, env.seed, differing, age_s, reason)


def audit(service: ContextService, store: SnapshotStore, *, sample: int, now_ms: int,
          rng: random.Random, worst: int = 5) -> AuditReport:
    """Recompute ``sample`` random snapshots live and compare them byte for byte."""
    envelopes = store.sample_snapshots(sample, rng)
    by_strategy: dict[str, list[tuple[Envelope, Request]]] = defaultdict(list)
    for env in envelopes:
        request = Request(env.note_id, env.seed, env.max_token_limit, env.as_of_ms,
                          traversal_token_limit=env.max_token_limit)
        by_strategy[env.strategy].append((env, request))
    findings: list[Finding] = []
    for strategy, pairs in by_strategy.items():
        results = service.compute_many([r for _, r in pairs], strategy).results
        for env, request in pairs:
            outcome = results[request]
            if isinstance(outcome, GraphRagError) and not isinstance(outcome, NoteNotFound):
                raise outcome
            live = None if isinstance(outcome, NoteNotFound) else outcome.to_json()
            if (finding := _compare(env, live, now_ms)) is not None:
                findings.append(finding)
    findings.sort(key=lambda f: (-f.differing_notes, -f.age_s))
    return AuditReport(len(envelopes), len(findings), tuple(findings[:worst]))
