"""Quality pools: success/recovered → positive, failed with a milestone → partial (and negative),
failed → negative, env_fault and ungraded → excluded."""

from __future__ import annotations

from trajforge.grade.pools import pools_of, quality_pools
from trajforge.schema import Outcome, Trajectory, Verdict


def traj(task: str, tier: str | None, milestones=()) -> Trajectory:
    return Trajectory(task_id=task, policy="p", env="sql", toolset_fingerprint="f", dialect="hermes",
                      outcome=Outcome(tier=tier) if tier else None,
                      verdict=Verdict(submitted=True, milestones=list(milestones)))


def test_each_tier_lands_in_its_pool():
    assert pools_of(traj("a", "success")) == ("positive",)
    assert pools_of(traj("a", "recovered")) == ("positive",)
    assert pools_of(traj("a", "failed", ["queried"])) == ("partial", "negative")
    assert pools_of(traj("a", "failed")) == ("negative",)
    assert pools_of(traj("a", "env_fault", ["queried"])) == ("excluded",)
    assert pools_of(traj("a", None)) == ("excluded",)


def test_an_episode_whose_grading_raised_is_excluded_not_negative():
    """``graded`` stores a grader that raised as failed/grade_error (the rates count it against the
    episode), but its answer may have been right: it was DPO's rejected, now it is no data."""
    from trajforge.grade import graded

    broken = traj("a", None, ["queried"]).model_copy(update={"verdict": "not a verdict"})
    g = graded(broken).model_copy(update={"verdict": Verdict(submitted=True, milestones=["queried"])})
    assert (g.outcome.tier, g.outcome.fail_reason) == ("failed", "grade_error")
    assert pools_of(g) == ("excluded",)
    assert quality_pools([g, traj("a", "failed")]).counts() == {"positive": 0, "partial": 0, "negative": 1,
                                                                 "excluded": 1}


def test_partial_tasks_are_the_nearly_solved_ones():
    pools = quality_pools([traj("a", "failed", ["queried"]), traj("b", "failed", ["queried"]),
                           traj("b", "success"), traj("c", "failed"), traj("d", "env_fault")])
    assert pools.counts() == {"positive": 1, "partial": 2, "negative": 3, "excluded": 1}
    assert pools.partial_tasks() == {"a"}  # b was solved, c reached nothing
