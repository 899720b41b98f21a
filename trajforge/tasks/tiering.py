"""Difficulty tiers read off a reference plan (``tier_from_plan``): the structural prior.

The measured tier — how often a policy actually solves the task — is
``trajforge.grade.difficulty.tier_by_solve_rate``; this module is the structural prior used when
no policy is at hand.

An environment that knows better reads its own plans: its ``EnvSpec.tier`` is asked first (SQL
scores its queries' structure, ``trajforge.envs.sql.tiering``). Otherwise the score is the number of steps before the final call plus one for every step
whose arguments reuse a value an earlier tool result showed (and the prompt did not): that step
depends on, and branches from, what came before. What counts as hard differs wildly between
environments (a travel booking takes 3 steps, a web checkout 12), so when verified example tasks
are at hand a ``TierScale`` built from them decides: a plan gets the majority tier of the examples
whose score is nearest its own. Without examples: 0-1 easy, 2-3 medium, 4 or more hard.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from trajforge._compat import moved_names
from trajforge.envs import env_spec
from trajforge.schema import Tier, ToolCall

TIERS: tuple[Tier, ...] = ("easy", "medium", "hard")


def tier_of(score: int, medium_at: int, hard_at: int) -> Tier:
    return "hard" if score >= hard_at else "medium" if score >= medium_at else "easy"


class TierScale(NamedTuple):
    """(score, tier) of verified example plans: a plan's tier is its nearest examples' tier."""

    points: tuple[tuple[int, Tier], ...]

    def tier(self, score: int) -> Tier | None:
        if not self.points:
            return None
        gap = min(abs(score - s) for s, _ in self.points)
        votes = Counter(t for s, t in self.points if abs(score - s) == gap)
        top = max(votes.values())
        return next(t for t in TIERS if votes[t] == top)  # a tie goes to the easier tier


def plan_score(plan: Sequence[ToolCall], final_tool: str | None, results: Sequence[str] = (),
               prompt: str = "") -> int:
    """Steps before the final call plus the steps that depend on an earlier result."""
    steps = [c for c in plan if c.name != final_tool]
    return len(steps) + dependent_steps(list(plan), list(results), prompt)


def dependent_steps(plan: Sequence[ToolCall], results: Sequence[str], prompt: str) -> int:
    """Steps whose string arguments carry a value first seen in an earlier tool result."""
    count = 0
    for i, call in enumerate(plan[1:], start=1):
        seen = " ".join(results[:i])
        values = [v.strip() for v in call.arguments.values() if isinstance(v, str)]
        if any(len(v) >= 2 and v in seen and v not in prompt for v in values):
            count += 1
    return count


def tier_from_plan(plan: Sequence[ToolCall], final_tool: str | None,
                   results: Sequence[str] = (), prompt: str = "",
                   scale: TierScale | None = None, env: str | None = None) -> Tier:
    """The structural tier of a reference plan; ``results`` are the executed calls' outputs.

    ``env``: ask that environment's ``EnvSpec.tier`` first."""
    own = env_spec(env).tier if env is not None else None
    tier = own(plan) if own is not None else None
    if tier is not None:
        return tier
    score = plan_score(plan, final_tool, results, prompt)
    return (scale.tier(score) if scale else None) or tier_of(score, medium_at=2, hard_at=4)


__all__ = ["TIERS", "TierScale", "dependent_steps", "plan_score", "tier_from_plan", "tier_of"]

__getattr__ = moved_names(__name__, {n: "trajforge.envs.sql.tiering" for n in (
    "QueryShape", "SQL_TOOL", "query_shape", "sql_score", "sql_tier")})
