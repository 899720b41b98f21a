"""Outcome tiers, fail reasons and composite rewards."""

from __future__ import annotations

from trajforge.grade.outcome import grade
from trajforge.grade.reward import RewardConfig, reward
from trajforge.harness.faults import GRADE_ERROR, fault
from trajforge.schema import Outcome, RewardBreakdown, Trajectory


def graded(traj: Trajectory, cfg: RewardConfig | None = None) -> Trajectory:
    """The trajectory with its outcome and reward filled in.

    Total: grading that raises gives ``failed`` with fail reason ``grade_error``, a zero reward and
    a ``grade_error`` note naming the exception — counted against the episode (a record that
    cannot be graded must not drop out of the rates as a fault would), and never the end of a
    collection."""
    try:
        outcome = grade(traj)
        return traj.model_copy(update={"outcome": outcome, "reward": reward(traj, outcome, cfg)})
    except Exception as e:  # noqa: BLE001 - recorded on the trajectory, see the docstring
        weights = (cfg or RewardConfig()).weights
        return traj.model_copy(update={
            "outcome": Outcome(tier="failed", fail_reason=GRADE_ERROR),
            "reward": RewardBreakdown(completion=0.0, step=0.0, efficiency=0.0, violation=0.0, weights=weights,
                                      total=0.0),
            "faults": [*traj.faults, fault(GRADE_ERROR, e)]})


__all__ = ["RewardConfig", "grade", "graded", "reward"]
