"""Evaluation metrics with 95% Wilson intervals, overall and per tier (shared by eval and training).

- completion: share of episodes whose answer the verifier accepted.
- validity: share of assistant turns that contained at least one valid tool call and no invalid
  one (after the parser's recorded repairs); ``strict_validity`` also requires no repair.
- avg_turns: mean assistant turns per episode.
Episodes graded ``env_fault`` are reported (``env_faults``) and left out of the rates: an
infrastructure failure says nothing about the model.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from trajforge.schema import Trajectory


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for a binomial proportion; (0, 1) when n == 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _rate(k: int, n: int) -> dict[str, Any]:
    lo, hi = wilson(k, n)
    return {"value": k / n if n else 0.0, "ci95": [round(lo, 4), round(hi, 4)], "k": k, "n": n}


def summarize(trajs: list[Trajectory]) -> dict[str, Any]:
    """Metrics for one group of graded episodes."""
    counted = [t for t in trajs if not (t.outcome and t.outcome.tier == "env_fault")]
    solved = sum(1 for t in counted if t.outcome and t.outcome.correct)
    turns = [s for t in counted for s in t.steps]
    valid = sum(1 for s in turns if s.calls and not s.errors)
    strict = sum(1 for s in turns if s.calls and not s.errors and not s.repairs)
    reasons: dict[str, int] = defaultdict(int)
    for t in counted:
        if t.outcome and t.outcome.fail_reason:
            reasons[t.outcome.fail_reason] += 1
    comp, val = _rate(solved, len(counted)), _rate(valid, len(turns))
    return {
        "n": len(counted),
        "completion": comp["value"],
        "completion_ci95": comp["ci95"],
        "validity": val["value"],
        "validity_ci95": val["ci95"],
        "strict_validity": strict / len(turns) if turns else 0.0,
        "avg_turns": sum(len(t.steps) for t in counted) / len(counted) if counted else 0.0,
        "avg_reward": (sum(t.reward.total for t in counted if t.reward) / len(counted)) if counted else 0.0,
        "env_faults": len(trajs) - len(counted),
        "fail_reasons": dict(sorted(reasons.items())),
    }


def evaluate(trajs: list[Trajectory]) -> dict[str, Any]:
    """Overall metrics plus a ``tiers`` breakdown."""
    by_tier: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        by_tier[t.tier or "unknown"].append(t)
    out = summarize(trajs)
    out["tiers"] = {tier: summarize(group) for tier, group in sorted(by_tier.items())}
    return out
