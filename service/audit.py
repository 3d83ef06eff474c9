"""Auditing snapshots: recompute a sample live and report how many are stale (docs/algorithms.md).

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
from graphrag.core.errors import Forbidden
from graphrag.tree.render import loads as loads_json
from service.context import ContextService
from service.decoding import decode_envelope
from service.envelope import Envelope
from service.ports import SnapshotCache

__all__ = ["AuditReport", "Finding", "audit"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One stale snapshot: how many related notes differ, and how old it is."""

    note_id: int
    strategy: str
    seed: int | None
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


def _identity(note: dict[str, object]) -> str:
    """A related note's identity: its URI (the tree) or notebook, title and path (today's Doughnut,
    whose output has no ids)."""
    if "uri" in note:
        return str(note["uri"])
    return orjson.dumps([note.get("notebook"), note.get("title"), note.get("retrievalPath")]).decode()


def _uris(result: dict[str, object]) -> set[str]:
    related = result.get("relatedNotes", [])
    if not isinstance(related, list):
        return set()
    return {_identity(n) for n in related if isinstance(n, dict)}


def _request(env: Envelope) -> Request:
    """The computation that made ``env``: its seed, clock and tokenLimit (a trace snapshot's result
    is cut at its ready tokenLimit, traced for the maximum)."""
    limit = env.max_token_limit if env.result_limit is None else env.result_limit
    return Request(env.note_id, env.seed, limit, env.as_of_ms,
                   traversal_token_limit=env.max_token_limit)


def _compare(env: Envelope, live: bytes | None, now_ms: int) -> Finding | None:
    stored = env.result_json
    age_s = (now_ms - env.computed_at_ms) / 1000
    if live is None:
        return Finding(env.note_id, env.strategy, env.seed, len(_uris(env.result)), age_s,
                       "focus note deleted or gone")
    if live == stored:
        return None
    differing = len(_uris(env.result) ^ _uris(loads_json(live)))
    reason = "related notes differ" if differing else "content differs"
    return Finding(env.note_id, env.strategy, env.seed, differing, age_s, reason)


def audit(service: ContextService, store: SnapshotCache, *, sample: int, now_ms: int,
          rng: random.Random, worst: int = 5) -> AuditReport:
    """Recompute ``sample`` random snapshots live and compare them byte for byte."""
    envelopes = [e for e in map(decode_envelope, store.sample(sample, rng)) if e is not None]
    by_strategy: dict[str, list[tuple[Envelope, Request]]] = defaultdict(list)
    for env in envelopes:
        by_strategy[env.strategy].append((env, _request(env)))
    findings: list[Finding] = []
    for strategy, pairs in by_strategy.items():
        results = service.compute_many([r for _, r in pairs], strategy).results
        for env, request in pairs:
            outcome = results[request]
            gone = isinstance(outcome, NoteNotFound | Forbidden)
            if isinstance(outcome, GraphRagError) and not gone:
                raise outcome
            live = None if gone else outcome.to_json()
            if (finding := _compare(env, live, now_ms)) is not None:
                findings.append(finding)
    findings.sort(key=lambda f: (-f.differing_notes, -f.age_s))
    return AuditReport(len(envelopes), len(findings), tuple(findings[:worst]))
