"""A right answer no result held is graded ``guessed``: counted as completed, never as a recovery,
a positive, an RFT keep or a DPO chosen."""

from __future__ import annotations

import trajforge
from tests.grade.test_fail_reasons import SQL_TASK, call, episode
from trajforge.envs.registry import EnvSpec, register, unregister
from trajforge.grade.metrics import summarize
from trajforge.grade.outcome import grade
from trajforge.grade.pools import quality_pools
from trajforge.schema import Step, ToolCall, ToolResult, Trajectory, Verdict
from trajforge.train.dpo import build_pairs
from trajforge.train.rft import keep_verified
from trajforge.train.sft import SFTConfig, select

# The expected answer is 7 and no customer is called Nobody: the first query errs, the second finds
# nothing; only a query whose result holds 7 grounds the answer.
ERROR = call("run_sql", query="SELECT nme FROM customers")
SEVEN = call("run_sql", query="SELECT count(*) - 113 FROM customers")


def test_a_right_answer_after_an_error_with_no_result_holding_it_is_a_guess_not_a_recovery():
    guess = episode(SQL_TASK, [ERROR, call("submit_answer", answer="7")])
    earned = episode(SQL_TASK, [ERROR, SEVEN, call("submit_answer", answer="7")])
    lucky_first = episode(SQL_TASK, [call("submit_answer", answer="7")])
    assert guess.outcome.tier == "recovered" and guess.outcome.guessed
    assert earned.outcome.tier == "recovered" and not earned.outcome.guessed
    assert lucky_first.outcome.tier == "success" and lucky_first.outcome.guessed
    assert guess.outcome.correct and not guess.outcome.positive

    m = summarize([guess, earned, lucky_first])
    assert m["completion"] == 1.0  # a guess still completed the task
    assert (m["recovery"]["k"], m["recovery"]["n"]) == (1, 2) and m["guessed"] == 2

    pools = quality_pools([guess, earned, lucky_first])
    assert pools.positive == [earned] and len(pools.excluded) == 2
    assert keep_verified([guess, earned, lucky_first], per_task=5) == [earned]
    kept, skipped = select([guess, earned, lucky_first], SFTConfig(tiers=["success", "recovered"]))
    assert kept == [earned] and skipped == {"guessed": 2}


def test_a_guess_is_never_a_chosen_and_is_rejected_against_a_grounded_success():
    guess = episode(SQL_TASK, [call("submit_answer", answer="7")])
    earned = episode(SQL_TASK, [SEVEN, call("submit_answer", answer="7")])
    pairs, skipped = build_pairs([guess, earned], min_reward_gap=0.0)
    assert [(p.chosen, p.rejected) for p in pairs] == [(earned, guess)]
    pairs, skipped = build_pairs([guess])
    assert pairs == [] and skipped == {"task_without_success": 1}


def test_environments_that_cannot_tell_never_mark_a_guess_and_a_broken_hook_does_not_fail_grading():
    right = Verdict(submitted=True, answer="7", correct=True)
    steps = [Step(index=0, raw="", calls=[ToolCall(name="f")], results=[ToolResult(name="f", content="1")])]
    t = Trajectory(task_id="t", policy="p", env="mcp:tools.json", toolset_fingerprint="f", dialect="hermes",
                   steps=steps, verdict=right, end="submitted")
    assert grade(t).tier == "success" and not grade(t).guessed

    def broken(traj):
        raise RuntimeError("a hook that fails must not fail grading")

    for name, hook in (("no-hook", None), ("broken-hook", broken), ("says-guess", lambda traj: False)):
        register(EnvSpec(name=name, env=trajforge.Environment, grounded=hook))
        try:
            assert grade(t.model_copy(update={"env": name})).guessed is (name == "says-guess")
        finally:
            unregister(name)


def test_guesses_can_be_selected_in_filters_and_queried(tmp_path):
    from trajforge.store import TrajectoryStore
    from trajforge.store.filters import filter_trajectories
    from trajforge.store.query import connect

    guess = episode(SQL_TASK, [call("submit_answer", answer="7")])
    earned = episode(SQL_TASK, [SEVEN, call("submit_answer", answer="7")])
    assert filter_trajectories([guess, earned], "guessed=true") == [guess]
    assert filter_trajectories([guess, earned], "guessed!=true") == [earned]
    store = TrajectoryStore(tmp_path / "s")
    for t in (guess, earned):
        store.append(t)
    rows = connect(tmp_path / "s").execute("SELECT guessed, correct FROM episodes ORDER BY guessed").fetchall()
    assert rows == [(False, True), (True, True)]
