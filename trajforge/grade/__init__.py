"""Outcome tiers, fail reasons and composite rewards."""

from __future__ import annotations

from trajforge.grade.outcome import grade
from trajforge.grade.reward import RewardConfig, reward
from trajforge.schema import Trajectory


def graded(traj: Trajectory, cfg: RewardConfig | None = None) -> Trajectory:
    """The trajectory with its outcome and reward filled in."""
    outcome = grade(traj)
    return traj.model_copy(update={"outcome": outcome, "reward": reward(traj, outcome, cfg)})


__all__ = ["RewardConfig", "grade", "graded", "reward"]
