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


def test_partial_tasks_are_the_nearly_solved_ones():
    pools = quality_pools([traj("a", "failed", ["queried"]), traj("b", "failed", ["queried"]),
                           traj("b", "success"), traj("c", "failed"), traj("d", "env_fault")])
    assert pools.counts() == {"positive": 1, "partial": 2, "negative": 3, "excluded": 1}
    assert pools.partial_tasks() == {"a"}  # b was solved, c reached nothing
