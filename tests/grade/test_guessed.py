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
    earned = episode(SQL_TASK, [ERROR, SEVEN, call("submit_answer", answer="7")])
    # With no query behind it a submission is refused once (SqlEnv.refuse_unsupported): the scripted
    # agent insists, so its guess is taken the second time, with the refusal as an error before it.
    guess = episode(SQL_TASK, [ERROR, call("submit_answer", answer="7"), call("submit_answer", answer="7")])
    lucky_first = episode(SQL_TASK, [call("submit_answer", answer="7")] * 2)
    assert [s.results[0].error for s in guess.steps] == ["no_such_column", "unsupported_answer", None]
    assert guess.outcome.tier == "recovered" and guess.outcome.guessed
    assert earned.outcome.tier == "recovered" and not earned.outcome.guessed
    assert lucky_first.outcome.tier == "recovered" and lucky_first.outcome.guessed
    assert guess.outcome.correct and not guess.outcome.positive

    m = summarize([guess, earned, lucky_first])
    assert m["completion"] == 1.0  # a guess still completed the task
    assert (m["recovery"]["k"], m["recovery"]["n"]) == (1, 3) and m["guessed"] == 2

    pools = quality_pools([guess, earned, lucky_first])
    assert pools.positive == [earned] and len(pools.excluded) == 2
    assert keep_verified([guess, earned, lucky_first], per_task=5) == [earned]
    kept, skipped = select([guess, earned, lucky_first], SFTConfig(tiers=["success", "recovered"]))
    assert kept == [earned] and skipped == {"guessed": 2}


def test_a_query_that_writes_the_answer_itself_does_not_ground_it():
    """``SELECT '7'`` shows 7 but found nothing: without this, guessing behind a literal query graded
    grounded and earned the found_answer milestone's reward (0.69 against a guess's 0.03)."""
    for fabricated in ("SELECT '7'", "SELECT 7", "SELECT 7 FROM customers LIMIT 1", "SELECT 3 + 4",
                       "WITH x AS (SELECT 3 + 4 AS n) SELECT n FROM x", 'SELECT "7" FROM customers'):
        t = episode(SQL_TASK, [call("run_sql", query=fabricated), call("submit_answer", answer="7")])
        assert t.outcome.correct and t.outcome.guessed, fabricated
        assert "found_answer" not in t.verdict.milestones, fabricated
    # Paging, rounding digits and a CASE's branches are not the answer written down.
    for grounded in ("SELECT COUNT(*) - 113 FROM customers LIMIT 7", "SELECT ROUND(COUNT(*) - 113, 7) FROM customers",
                     "SELECT CASE WHEN COUNT(*) > 0 THEN COUNT(*) - 113 ELSE 7 END FROM customers"):
        t = episode(SQL_TASK, [call("run_sql", query=grounded), call("submit_answer", answer="7")])
        assert t.outcome.correct and not t.outcome.guessed, grounded


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
    for t in (guess, earned.model_copy(update={"sample": 1})):  # one episode key each, or one is read
        store.append(t)
    rows = connect(tmp_path / "s").execute("SELECT guessed, correct FROM episodes ORDER BY guessed").fetchall()
    assert rows == [(False, True), (True, True)]


def test_a_guess_earns_no_completion_reward_unless_the_config_pays_it(tmp_path):
    """GRPO ranks a group by the reward total: a paid guess would outrank an honest failed lookup."""
    from typer.testing import CliRunner

    from trajforge.cli.main import app
    from trajforge.grade import RewardConfig, graded, reward
    from trajforge.store import TrajectoryStore

    def run(calls):  # with a reference length, so the efficiency component can pay
        return graded(episode(SQL_TASK, calls).model_copy(update={"reference_turns": 2}))

    guess = run([call("submit_answer", answer="7")])
    earned = run([SEVEN, call("submit_answer", answer="7")])
    missed = run([ERROR, call("submit_answer", answer="8")])
    assert (guess.reward.completion, guess.reward.efficiency) == (0.0, 0.0)
    assert earned.reward.completion == 1.0 and earned.reward.efficiency > 0
    assert earned.reward.total > guess.reward.total and guess.reward.total >= missed.reward.total

    paid = reward(guess, guess.outcome, RewardConfig(guess_credit=1.0))
    assert paid.completion == 1.0 and paid.total > missed.reward.total + 0.5  # the old pay
    half = reward(guess, guess.outcome, RewardConfig(guess_credit=0.5))
    assert half.completion == 0.5 and guess.reward.total < half.total < paid.total

    store = TrajectoryStore(tmp_path / "s")
    store.append(guess)
    conf = tmp_path / "rewards.toml"
    conf.write_text("[rewards]\nguess_credit = 1.0\n")
    res = CliRunner().invoke(app, ["grade", str(tmp_path / "s"), "--config", str(conf)])
    assert res.exit_code == 0, res.output
    assert TrajectoryStore(tmp_path / "s").read()[0].reward.completion == 1.0
    conf.write_text("[rewards]\nguess_credit = 2.0\n")
    res = CliRunner().invoke(app, ["grade", str(tmp_path / "s"), "--config", str(conf)])
    assert res.exit_code == 2 and f"--config {conf}: [rewards] guess_credit: Input should be less than or equal to 1" \
        in res.output
