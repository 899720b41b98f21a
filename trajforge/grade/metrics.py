"""Evaluation metrics with 95% Wilson intervals, overall and per tier (shared by eval and training).

- completion: share of episodes whose answer the verifier accepted.
- validity: share of assistant turns that contained at least one valid tool call and no invalid
  one (after the parser's recorded repairs); ``strict_validity`` also requires no repair.
- avg_turns: mean assistant turns per episode.
- pass_at_k: when tasks were sampled several times, the unbiased pass@k estimate (Chen et al.
  2021) for k = 1, 2, 4, … up to the fewest samples any task has. pass@k above pass@1 is headroom
  that RL can turn into greedy success by sharpening; pass@k ≈ pass@1 means the policy never
  finds the answer, and sharpening has nothing to work with.
- recovery_rate: of the episodes with at least one problem turn (a parse error, a tool error or
  a marked mistake), the share whose answer was still accepted (``recovered`` episodes):
  whether the policy gets back on track after an error. A ``guessed`` answer (right, but no result
  held it) is not a recovery; ``guessed`` counts the accepted episodes marked so. ``first_error_rate``: the share of
  episodes whose first turn already had a problem (a recipe that teaches recovery must not buy
  it with more first-attempt errors).
- ``paired_p(fixed, broke)``: the exact McNemar test of two policies on the same tasks.
Episodes graded ``env_fault`` are reported (``env_faults``) and left out of the rates: an
infrastructure failure says nothing about the model.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from trajforge.grade.outcome import step_problem
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
    troubled = [t for t in counted if any(step_problem(s) or s.mistake for s in t.steps)]
    recovery = _rate(sum(1 for t in troubled if t.outcome and t.outcome.positive), len(troubled))
    first = sum(1 for t in counted if t.steps and step_problem(t.steps[0]))
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
        "recovery_rate": recovery["value"],
        "recovery": recovery,
        "first_error_rate": first / len(counted) if counted else 0.0,
        "guessed": sum(1 for t in counted if t.outcome and t.outcome.guessed),
    }


def paired_p(fixed: int, broke: int) -> float:
    """Two-sided exact McNemar p-value for two policies on the same tasks: ``fixed`` tasks only
    the second solved, ``broke`` tasks only the first did (ties carry no information)."""
    n = fixed + broke
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(fixed, broke) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that at least one of k samples drawn without replacement from n, of which c
    are correct, is correct: 1 − C(n−c, k) / C(n, k)."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_curve(trajs: list[Trajectory]) -> dict[int, float]:
    """Mean pass@k over tasks for k = 1, 2, 4, … ≤ the fewest samples of any task (``{}`` when some
    task has a single sample). env_fault episodes are not samples."""
    runs: dict[str, list[bool]] = defaultdict(list)
    for t in trajs:
        if not (t.outcome and t.outcome.tier == "env_fault"):
            runs[t.task_id].append(bool(t.outcome and t.outcome.correct))
    n_min = min((len(r) for r in runs.values()), default=0)
    if n_min < 2:
        return {}
    ks = [2 ** i for i in range(n_min.bit_length())]  # powers of two up to n_min
    return {k: round(sum(pass_at_k(len(r), sum(r), k) for r in runs.values()) / len(runs), 4)
            for k in ks}


def evaluate(trajs: list[Trajectory]) -> dict[str, Any]:
    """Overall metrics plus a ``tiers`` breakdown (and ``pass_at_k`` for repeated samples)."""
    by_tier: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        by_tier[t.tier or "unknown"].append(t)
    out = summarize(trajs)
    out["tiers"] = {tier: summarize(group) for tier, group in sorted(by_tier.items())}
    curve = pass_curve(trajs)
    if curve:
        out["pass_at_k"] = curve
    return out
