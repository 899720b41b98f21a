"""Difficulty measured, not guessed: tier tasks by how often a policy solves them in k tries.

    from trajforge.grade.difficulty import tier_by_solve_rate
    tiered = tier_by_solve_rate(tasks, make_policy("openai:http://127.0.0.1:8000/v1#qwen"), k=4)

The structural tier of a reference plan (``tasks/tiering.py``) is a prior; a policy's solve rate
is the measurement. Every task runs ``k`` episodes through the same harness as collection and
evaluation; a solved episode is one the verifier accepted. ``env_fault`` episodes (infrastructure,
not the policy) don't count either way, and a task with no counted episode keeps its tier.
Rate >= ``easy_at`` is easy, >= ``medium_at`` medium, else hard.

This lives in ``grade`` rather than ``tasks`` because it runs the harness, which sits above tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from trajforge.grade.outcome import grade
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies.base import Policy
from trajforge.schema import Task, Tier


class SolveRate(NamedTuple):
    """How one task fared over its counted episodes."""

    solved: int
    counted: int
    """Episodes that ended without an environment fault."""

    @property
    def rate(self) -> float | None:
        return self.solved / self.counted if self.counted else None


def tier_for_rate(rate: float, easy_at: float = 2 / 3, medium_at: float = 1 / 3) -> Tier:
    return "easy" if rate >= easy_at else "medium" if rate >= medium_at else "hard"


def solve_rates(tasks: Sequence[Task], policy: Policy, k: int,
                harness: HarnessConfig | None = None) -> dict[str, SolveRate]:
    """Task id → SolveRate over ``k`` episodes each."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    solved: dict[str, int] = {t.id: 0 for t in tasks}
    counted: dict[str, int] = {t.id: 0 for t in tasks}
    for traj in run_episodes(tasks, policy, harness, samples=k):
        outcome = grade(traj)
        if outcome.tier == "env_fault":
            continue
        counted[traj.task_id] += 1
        solved[traj.task_id] += outcome.correct
    return {tid: SolveRate(solved[tid], counted[tid]) for tid in solved}


def tier_by_solve_rate(tasks: Sequence[Task], policy: Policy, k: int,
                       harness: HarnessConfig | None = None, easy_at: float = 2 / 3,
                       medium_at: float = 1 / 3) -> list[Task]:
    """``tasks`` with tiers set from ``policy``'s solve rate over ``k`` samples each."""
    rates = solve_rates(tasks, policy, k, harness)
    out = []
    for task in tasks:
        rate = rates[task.id].rate
        tier = task.tier if rate is None else tier_for_rate(rate, easy_at, medium_at)
        out.append(task.model_copy(update={"tier": tier}))
    return out


__all__ = ["SolveRate", "solve_rates", "tier_by_solve_rate", "tier_for_rate"]
