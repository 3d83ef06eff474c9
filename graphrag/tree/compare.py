"""Side-by-side comparison of strategies on the same focus notes (pure: timings come in)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from graphrag.tree.outcome import Outcome

__all__ = ["Trial", "compare", "jaccard", "render_table"]


@dataclass(frozen=True, slots=True)
class Trial:
    """One strategy's outcome for one note and the compute time it took (ms)."""

    outcome: Outcome
    compute_ms: float


def jaccard(a: set[int], b: set[int]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty selections agree fully (1.0)."""
    return 1.0 if not a and not b else len(a & b) / len(a | b)


def _stats(trials: Sequence[Trial]) -> dict[str, Any]:
    labels: Counter[str] = Counter(p.relation.value for t in trials for p in t.outcome.picks)
    return {
        "relatedNotes": sum(len(t.outcome.picks) for t in trials),
        "tokens": sum(t.outcome.focus.tokens + sum(t.outcome.related_tokens) for t in trials),
        "computeMs": round(sum(t.compute_ms for t in trials), 3),
        "labels": dict(sorted(labels.items())),
    }


def _overlap(per_strategy: Mapping[str, Sequence[Trial]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for a, b in combinations(per_strategy, 2):
        pairs = zip(per_strategy[a], per_strategy[b], strict=True)
        scores = [
            jaccard({p.note_id for p in x.outcome.picks}, {p.note_id for p in y.outcome.picks})
            for x, y in pairs
        ]
        out[f"{a}~{b}"] = round(sum(scores) / len(scores), 4) if scores else 1.0
    return out


def compare(trials: Mapping[int, Mapping[str, Trial]]) -> dict[str, Any]:
    """Per note and in total: related notes, tokens, label histogram, compute time, Jaccard overlap
    of the selected note ids between every pair of strategies (mean over notes in the total)."""
    notes = []
    for note_id, by_strategy in trials.items():
        notes.append(
            {
                "noteId": note_id,
                "strategies": {s: _stats([t]) for s, t in by_strategy.items()},
                "overlap": _overlap({s: [t] for s, t in by_strategy.items()}),
            }
        )
    strategies = list(next(iter(trials.values()), {}))
    columns = {s: [trials[n][s] for n in trials] for s in strategies}
    total = {"strategies": {s: _stats(ts) for s, ts in columns.items()}, "overlap": _overlap(columns)}
    return {"notes": notes, "total": total}


def _block(title: str, entry: Mapping[str, Any]) -> list[str]:
    lines = [title]
    for strategy, s in entry["strategies"].items():
        labels = ", ".join(f"{k} {v}" for k, v in sorted(s["labels"].items(), key=lambda kv: -kv[1]))
        lines.append(
            f"  {strategy:<17}{s['relatedNotes']:>8}{s['tokens']:>9}{s['computeMs']:>11.2f}"
            f"  {labels or '-'}"
        )
    lines += [f"  overlap {pair}: {score:.2f}" for pair, score in entry["overlap"].items()]
    return lines


def render_table(report: Mapping[str, Any]) -> str:
    """A readable text table of :func:`compare`'s report."""
    header = f"  {'strategy':<17}{'related':>8}{'tokens':>9}{'ms':>11}  labels"
    lines = [header]
    for note in report["notes"]:
        lines += _block(f"note /n{note['noteId']}", note)
    lines += _block("total", report["total"])
    return "\n".join(lines)
