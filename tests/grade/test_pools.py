"""Quality pools: success/recovered → positive, failed after a milestone that shows it got close →
partial (and negative), failed → negative, env_fault and ungraded → excluded."""

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
    assert pools_of(traj("a", "failed", ["found_answer"])) == ("partial", "negative")
    assert pools_of(traj("a", "failed")) == ("negative",)
    assert pools_of(traj("a", "env_fault", ["found_answer"])) == ("excluded",)
    assert pools_of(traj("a", None)) == ("excluded",)


def test_an_episode_whose_grading_raised_is_excluded_not_negative():
    """``graded`` stores a grader that raised as failed/grade_error (the rates count it against the
    episode), but its answer may have been right: it was DPO's rejected, now it is no data."""
    from trajforge.grade import graded

    broken = traj("a", None, ["found_answer"]).model_copy(update={"verdict": "not a verdict"})
    g = graded(broken).model_copy(update={"verdict": Verdict(submitted=True, milestones=["found_answer"])})
    assert (g.outcome.tier, g.outcome.fail_reason) == ("failed", "grade_error")
    assert pools_of(g) == ("excluded",)
    assert quality_pools([g, traj("a", "failed")]).counts() == {"positive": 0, "partial": 0, "negative": 1,
                                                                 "excluded": 1}


def test_partial_tasks_are_the_nearly_solved_ones():
    pools = quality_pools([traj("a", "failed", ["found_answer"]), traj("b", "failed", ["found_answer"]),
                           traj("b", "success"), traj("c", "failed"), traj("d", "env_fault")])
    assert pools.counts() == {"positive": 1, "partial": 2, "negative": 3, "excluded": 1}
    assert pools.partial_tasks() == {"a"}  # b was solved, c reached nothing


def failed(env: str, milestones) -> Trajectory:
    return traj("a", "failed", milestones).model_copy(update={"env": env})


def test_a_sql_failure_that_only_queried_or_submitted_is_not_nearly_solved():
    """Any query that ran reaches ``query_ok`` and any guess ``submitted``: that is nearly every
    failure, not the curriculum's "nearly solved" (``EnvSpec.progress``)."""
    assert pools_of(failed("sql", ["submitted"])) == ("negative",)
    assert pools_of(failed("sql", ["explored_schema", "query_ok", "submitted"])) == ("negative",)
    assert pools_of(failed("sql", ["query_ok", "found_answer", "submitted"])) == ("partial", "negative")


def test_each_builtin_environment_names_the_milestones_that_mean_close():
    assert pools_of(failed("code", ["wrote_file", "ran_code", "submitted"])) == ("negative",)
    assert pools_of(failed("code", ["wrote_file", "ran_code", "tests_passed", "submitted"])) == (
        "partial", "negative")
    assert pools_of(failed("web", ["open", "submit"])) == ("negative",)
    assert pools_of(failed("web", ["open", "locate", "submit"])) == ("partial", "negative")
    assert pools_of(failed("travel", ["searched", "checked_weather", "finished"])) == ("negative",)
    assert pools_of(failed("travel", ["searched", "found_option", "finished"])) == ("partial", "negative")
    assert pools_of(failed("sql-exec", ["submitted"])) == ("negative",)  # its one milestone is trivial


def test_an_environment_without_progress_keeps_any_milestone_as_partial():
    from trajforge.envs import EnvSpec, register, unregister
    from trajforge.envs.sql import SqlEnv

    register(EnvSpec(name="no-progress", env=SqlEnv), replace=True)
    try:
        assert pools_of(failed("no-progress", ["submitted"])) == ("partial", "negative")
        assert pools_of(failed("no-progress", [])) == ("negative",)
    finally:
        unregister("no-progress")
    # Not installed here, or a tool list (never imported for this): the same rule.
    assert pools_of(failed("not-installed", ["x"])) == ("partial", "negative")
    assert pools_of(failed("mcp:/nowhere/tools.json", ["search"])) == ("partial", "negative")
