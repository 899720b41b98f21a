"""How many turns an episode gets: the explicit setting, else the task's own budget, else its
environment's default.

    turn_budget(task, cfg.max_turns)

1. ``HarnessConfig.max_turns`` when it is set (``--max-turns N``): the same cap for every task;
2. else the task's own budget, read off its verified reference: ``2 * len(reference) + 4`` — the
   reference solves it in ``len(reference)`` turns, and a model gets as many again to explore and
   recover, plus slack (a web reference of 14 calls gets 32 turns, a two-call SQL task 8);
3. else (a task without a reference) its environment's ``EnvSpec.max_turns``.

One global cap cannot fit every environment: web references run 7-14 calls, so the old fixed 8
turns made the expert itself fail half the web tasks.
"""

from __future__ import annotations

from functools import lru_cache

from trajforge.envs.registry import DEFAULT_MAX_TURNS, env_spec
from trajforge.schema import Task

REFERENCE_FACTOR = 2
REFERENCE_SLACK = 4


def turn_budget(task: Task, max_turns: int | None = None) -> int:
    """The turns ``task`` gets (see the module docstring)."""
    if max_turns is not None:
        return max_turns
    if task.reference:
        return REFERENCE_FACTOR * len(task.reference) + REFERENCE_SLACK
    return env_default(task.env)


@lru_cache(maxsize=256)
def env_default(env: str) -> int:
    """The environment's own default (``DEFAULT_MAX_TURNS`` for one that cannot be looked up)."""
    try:
        return env_spec(env).max_turns
    except (KeyError, ValueError, OSError):
        return DEFAULT_MAX_TURNS


__all__ = ["REFERENCE_FACTOR", "REFERENCE_SLACK", "env_default", "turn_budget"]
