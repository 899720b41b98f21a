"""Difficulty tiers read off a reference plan (``tier_from_plan``) or one SQL query (``sql_tier``).

The measured tier — how often a policy actually solves the task — is
``trajforge.grade.difficulty.tier_by_solve_rate``; this module is the structural prior used when
no policy is at hand.

SQL scoring, matched to the hand-made templates in ``tasks/sql.py`` (a test checks every one):
a join (any number) +1, GROUP BY +1, HAVING +1, and +3 for any of subquery, CTE, window function
or set operation; every query after the first adds +3 (its input came from an earlier result).
0 is easy, 1-2 medium, 3 or more hard. So one-table filters and plain aggregates are easy, join or
group-by aggregates medium, and nested or multi-step questions hard.

Other environments: the score is the number of steps before the final call plus one for every step
whose arguments reuse a value an earlier tool result showed (and the prompt did not): that step
depends on, and branches from, what came before. What counts as hard differs wildly between
environments (a travel booking takes 3 steps, a web checkout 12), so when verified example tasks
are at hand a ``TierScale`` built from them decides: a plan gets the majority tier of the examples
whose score is nearest its own. Without examples: 0-1 easy, 2-3 medium, 4 or more hard.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from trajforge.schema import Tier, ToolCall

SQL_TOOL = "run_sql"
TIERS: tuple[Tier, ...] = ("easy", "medium", "hard")


class QueryShape(NamedTuple):
    """Structural features of one SQL query (string literals and comments ignored)."""

    joins: int
    aggregates: int
    group_by: bool
    having: bool
    subquery: bool
    cte: bool
    window: bool
    set_op: bool

    @property
    def score(self) -> int:
        nested = self.subquery or self.cte or self.window or self.set_op
        return min(self.joins, 1) + self.group_by + self.having + 3 * nested


def _strip_literals(sql: str) -> str:
    """Drop comments and string literals, so ``WHERE name = 'Join Co'`` is no join."""
    sql = re.sub(r"--[^\n]*|/\*.*?(\*/|$)", " ", sql, flags=re.S)
    return re.sub(r"'(?:[^']|'')*'", "''", sql)


def query_shape(sql: str) -> QueryShape:
    q = _strip_literals(sql).upper()
    explicit = len(re.findall(r"\bJOIN\b", q))
    # FROM a, b (an implicit join): a comma right after the first table of a FROM clause.
    implicit = len(re.findall(r"\bFROM\s+[\w\".]+(?:\s+(?:AS\s+)?\w+)?\s*,", q))
    return QueryShape(
        joins=explicit + implicit,
        aggregates=len(re.findall(r"\b(?:COUNT|SUM|AVG|MIN|MAX|TOTAL|GROUP_CONCAT)\s*\(", q)),
        group_by=bool(re.search(r"\bGROUP\s+BY\b", q)),
        having=bool(re.search(r"\bHAVING\b", q)),
        subquery=bool(re.search(r"\(\s*(?:SELECT|WITH|VALUES)\b", q)),
        cte=bool(re.match(r"\s*WITH\b", q)),
        window=bool(re.search(r"\bOVER\s*(?:\(|\w)", q)),
        set_op=bool(re.search(r"\b(?:UNION|INTERSECT|EXCEPT)\b", q)),
    )


def tier_of(score: int, medium_at: int, hard_at: int) -> Tier:
    return "hard" if score >= hard_at else "medium" if score >= medium_at else "easy"


def sql_score(queries: Sequence[str]) -> int:
    """Structural score of a sequence of queries (see the module docstring)."""
    return sum(query_shape(q).score for q in queries) + 3 * max(len(queries) - 1, 0)


def sql_tier(queries: Sequence[str]) -> Tier:
    return tier_of(sql_score(queries), medium_at=1, hard_at=3)


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
                   scale: TierScale | None = None) -> Tier:
    """The structural tier of a reference plan; ``results`` are the executed calls' outputs."""
    queries = [str(c.arguments.get("query", "")) for c in plan if c.name == SQL_TOOL]
    if queries:
        return sql_tier(queries)
    score = plan_score(plan, final_tool, results, prompt)
    return (scale.tier(score) if scale else None) or tier_of(score, medium_at=2, hard_at=4)


__all__ = ["QueryShape", "TierScale", "dependent_steps", "plan_score", "query_shape", "sql_score",
           "sql_tier", "tier_from_plan"]
