"""Difficulty tiers of SQL plans, read off the structure of their queries.

Scoring, matched to the hand-made templates in ``envs/sql/tasks.py`` (a test checks every one):
a join (any number) +1, GROUP BY +1, HAVING +1, and +3 for any of subquery, CTE, window function
or set operation; every query after the first adds +3 (its input came from an earlier result).
0 is easy, 1-2 medium, 3 or more hard. So one-table filters and plain aggregates are easy, join or
group-by aggregates medium, and nested or multi-step questions hard.

``plan_tier`` is the SQL environment's ``EnvSpec.tier`` (``trajforge.tasks.tiering`` asks it first).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from trajforge.schema import Tier, ToolCall
from trajforge.tasks.tiering import tier_of

SQL_TOOL = "run_sql"


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


def sql_score(queries: Sequence[str]) -> int:
    """Structural score of a sequence of queries (see the module docstring)."""
    return sum(query_shape(q).score for q in queries) + 3 * max(len(queries) - 1, 0)


def sql_tier(queries: Sequence[str]) -> Tier:
    return tier_of(sql_score(queries), medium_at=1, hard_at=3)


def plan_tier(plan: Sequence[ToolCall]) -> Tier | None:
    """The tier of a plan's queries; None for a plan without ``run_sql`` (then steps are counted)."""
    queries = [str(c.arguments.get("query", "")) for c in plan if c.name == SQL_TOOL]
    return sql_tier(queries) if queries else None


__all__ = ["QueryShape", "SQL_TOOL", "plan_tier", "query_shape", "sql_score", "sql_tier"]
