"""Reading a finished episode for how its submitted answer went wrong (``EnvSpec.wrong_answer``).

An environment's hook takes the stored trajectory — its verdict, milestones and the tool results
the agent saw — and returns a fail reason finer than ``wrong_answer`` (``grade/outcome.py`` lists
them all): ``retrieval_miss`` when the right value never appeared in any result, ``logic_break``
when it did and something else was submitted, and the environment's own kinds. It reads only what
the trajectory stores, so re-grading an old store classifies its episodes too.
"""

from __future__ import annotations

from typing import NamedTuple

from trajforge.schema import ToolCall, ToolResult, Trajectory


class Executed(NamedTuple):
    """One dispatched call of an episode and its result."""

    call: ToolCall
    result: ToolResult


def executed(traj: Trajectory) -> list[Executed]:
    """Every dispatched call with its result, in order (a step's results answer its calls)."""
    return [Executed(c, r) for step in traj.steps for c, r in zip(step.calls, step.results)]


def last_ok(traj: Trajectory, tool: str) -> Executed | None:
    """The last successful call of ``tool`` (None when it never succeeded)."""
    return next((e for e in reversed(executed(traj)) if e.call.name == tool and e.result.ok), None)


def milestones(traj: Trajectory) -> list[str]:
    return list(traj.verdict.milestones) if traj.verdict else []
