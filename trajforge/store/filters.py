"""Choosing trajectories by what happened to them: small ``field=value[,value]`` expressions.

    filter_trajectories(trajs, "fail_reason=no_such_column,no_such_table env=sql")
    filter_trajectories(trajs, ["outcome_tier=failed", "split!=heldout"])

    trajforge export store/ --format openai --out x.jsonl --where fail_reason=retrieval_miss

A clause is ``field=value[,value...]`` (any of the values) or ``field!=value[,value...]`` (none of
them); clauses are separated by spaces or given one per ``--where``, and all must hold. The value
``none`` matches an empty field (``fail_reason=none``: the episodes that did not fail, or were not
graded). Fields are the ``trajforge query`` episodes view's columns of the same names:

- ``fail_reason``: ``trajforge.grade.outcome.FAIL_REASONS`` (``no_such_column``, ``retrieval_miss``...)
- ``outcome_tier``: success, recovered, failed, env_fault
- ``guessed``: true (accepted, but no result held the answer: ``Outcome.guessed``) or false
- ``tier``: the task's tier (easy, medium, hard); ``env``, ``split``, ``policy``, ``task_id``

A value the trajectories never hold is not an error here (a filter may rightly select nothing);
``held_values`` lists what they do hold, for a message saying so.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Callable, NamedTuple

from trajforge.schema import Trajectory

FIELDS: dict[str, Callable[[Trajectory], str | None]] = {
    "fail_reason": lambda t: t.outcome.fail_reason if t.outcome else None,
    "outcome_tier": lambda t: t.outcome.tier if t.outcome else None,
    "guessed": lambda t: str(t.outcome.guessed).lower() if t.outcome else None,
    "tier": lambda t: t.tier,
    "env": lambda t: t.env,
    "split": lambda t: t.split,
    "policy": lambda t: t.policy,
    "task_id": lambda t: t.task_id,
}
"""Each field a clause may name, and how to read it off a trajectory."""
NONE = "none"
"""The value that matches an empty field."""
_CLAUSE = re.compile(r"^(\w+)(!?=)(.+)$")


class Clause(NamedTuple):
    """One ``field=values`` (or ``field!=values``) condition."""

    field: str
    values: frozenset[str]
    negated: bool = False

    def matches(self, traj: Trajectory) -> bool:
        return (_value(self.field, traj) in self.values) != self.negated

    def __str__(self) -> str:
        return f"{self.field}{'!=' if self.negated else '='}{','.join(sorted(self.values))}"


class Where(NamedTuple):
    """Clauses that must all hold (none: everything matches)."""

    clauses: tuple[Clause, ...] = ()

    def matches(self, traj: Trajectory) -> bool:
        return all(c.matches(traj) for c in self.clauses)

    def __str__(self) -> str:
        return " ".join(map(str, self.clauses))


def parse_where(where: str | Sequence[str] | Where | None) -> Where:
    """A ``Where`` from an expression, or from several (``--where`` given more than once).
    ValueError naming the bad clause and the fields there are."""
    if where is None or isinstance(where, Where):
        return where or Where()
    texts = [where] if isinstance(where, str) else list(where)
    clauses = []
    for text in texts:
        for part in text.replace(";", " ").split():
            m = _CLAUSE.match(part)
            if m is None:
                raise ValueError(f"--where clause {part!r} is not field=value[,value] (or field!=value)")
            field, op, raw = m.groups()
            if field not in FIELDS:
                raise ValueError(f"--where: unknown field {field!r}; fields: {', '.join(FIELDS)}")
            values = frozenset(v for v in raw.split(",") if v)
            if not values:
                raise ValueError(f"--where clause {part!r} names no value")
            clauses.append(Clause(field, values, op == "!="))
    return Where(tuple(clauses))


def filter_trajectories(trajs: Iterable[Trajectory],
                        where: str | Sequence[str] | Where | None) -> list[Trajectory]:
    """The trajectories ``where`` selects, in their order (all of them when it is empty)."""
    selected = parse_where(where)
    return [t for t in trajs if selected.matches(t)]


def held_values(trajs: Iterable[Trajectory], field: str) -> Counter[str]:
    """How many trajectories hold each value of ``field`` (``none`` for empty ones)."""
    return Counter(_value(field, t) for t in trajs)


def _value(field: str, traj: Trajectory) -> str:
    return FIELDS[field](traj) or NONE


__all__ = ["FIELDS", "NONE", "Clause", "Where", "filter_trajectories", "held_values", "parse_where"]
