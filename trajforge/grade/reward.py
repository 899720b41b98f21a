"""Composite reward: R = l1*completion + l2*step + l3*efficiency - l4*violation.

- completion: 1 if the verifier accepted the answer.
- step: ``milestone_bonus`` per process milestone reached (dense signal for partial progress).
- efficiency: reference turns / turns used, for accepted answers only (fewer turns is better,
  never above 1).
- violation: share of turns that contained a malformed or invalid call.
"""

from __future__ import annotations

from pydantic import BaseModel

from trajforge.schema import Outcome, RewardBreakdown, Trajectory


class RewardConfig(BaseModel):
    """Weights of the composite reward."""

    weights: tuple[float, float, float, float] = (0.5, 0.3, 0.1, 0.1)
    """(l1 completion, l2 step, l3 efficiency, l4 violation)."""
    milestone_bonus: float = 0.1
    """Step component added per milestone reached."""


def reward(traj: Trajectory, outcome: Outcome, cfg: RewardConfig | None = None) -> RewardBreakdown:
    cfg = cfg or RewardConfig()
    l1, l2, l3, l4 = cfg.weights
    turns = max(1, len(traj.steps))
    completion = 1.0 if outcome.correct else 0.0
    step = cfg.milestone_bonus * len(traj.verdict.milestones if traj.verdict else ())
    efficiency = min(1.0, traj.reference_turns / turns) if outcome.correct and traj.reference_turns else 0.0
    violation = sum(1 for s in traj.steps if s.errors) / turns
    total = l1 * completion + l2 * step + l3 * efficiency - l4 * violation
    return RewardBreakdown(completion=completion, step=step, efficiency=efficiency,
                           violation=violation, weights=cfg.weights, total=round(total, 6))
