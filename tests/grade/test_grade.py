import pytest

from trajforge.grade import RewardConfig, grade, graded, reward
from trajforge.schema import CallError, Step, ToolCall, ToolResult, Trajectory

CALL = ToolCall(name="run_sql", arguments={"query": "q"})


def make(steps, verdict, end="submitted", ref=2):
    return Trajectory(task_id="t", policy="p", env="sql", toolset_fingerprint="f", dialect="hermes",
                      steps=steps, verdict=verdict, end=end, reference_turns=ref)


def ok_step(i):
    return Step(index=i, raw="", calls=[CALL], results=[ToolResult(name="run_sql", content="1")])


# found_answer: a result held the answer (SQL's grounded hook), else the answer would be a guess
RIGHT = {"submitted": True, "correct": True, "answer": "7", "milestones": ["query_ok", "found_answer", "submitted"]}
WRONG = {"submitted": True, "correct": False, "answer": "8", "milestones": ["query_ok", "submitted"]}


def test_success_and_reward_components():
    t = make([ok_step(0), ok_step(1)], RIGHT)
    out = grade(t)
    assert out.tier == "success" and out.fail_reason is None
    r = reward(t, out)
    assert (r.completion, r.step, r.efficiency, r.violation) == (1.0, pytest.approx(0.3), 1.0, 0.0)
    assert r.total == pytest.approx(0.5 + 0.3 * 0.3 + 0.1)


def test_recovered_after_error():
    bad = Step(index=0, raw="x", errors=[CallError(kind="malformed", message="m")])
    t = make([bad, ok_step(1), ok_step(2)], RIGHT)
    assert grade(t).tier == "recovered"
    r = reward(t, grade(t))
    assert r.violation == pytest.approx(1 / 3) and r.efficiency == pytest.approx(2 / 3)


def test_recovered_after_tool_error():
    sql_err = Step(index=0, raw="", calls=[CALL], results=[ToolResult(name="run_sql", content="E", ok=False, error="sql_error")])
    assert grade(make([sql_err, ok_step(1)], RIGHT)).tier == "recovered"


@pytest.mark.parametrize("steps,verdict,end,reason", [
    ([ok_step(0)], WRONG, "submitted", "retrieval_miss"),  # "1" never held the expected answer
    ([Step(index=0, raw="hi", errors=[CallError(kind="no_call", message="m")])] * 3, {}, "max_errors", "no_call"),
    ([Step(index=0, raw="", errors=[CallError(kind="invalid_args", message="m")])], {}, "max_errors", "invalid_args"),
    ([Step(index=0, raw="", errors=[CallError(kind="unknown_tool", message="m")])], {}, "max_errors", "unknown_tool"),
    ([Step(index=0, raw="", errors=[CallError(kind="malformed", message="m")])], {}, "max_errors", "malformed"),
    ([ok_step(i) for i in range(8)], {}, "max_turns", "max_turns"),
    ([ok_step(0), Step(index=1, raw="", calls=[CALL], results=[
        ToolResult(name="run_sql", content="E", ok=False, error="no_such_column")])], {}, "max_turns",
     "no_such_column"),  # out of turns while stuck on an error: the error says more
])
def test_fail_reasons(steps, verdict, end, reason):
    out = grade(make(steps, verdict, end))
    assert out.tier == "failed" and out.fail_reason == reason


def test_env_fault_beats_everything():
    crash = Step(index=0, raw="", calls=[CALL], results=[ToolResult(name="run_sql", content="", ok=False, error="env_fault", fault=True)])
    assert grade(make([crash], RIGHT, end="env_fault")).tier == "env_fault"


def test_weights_configurable_and_logged():
    t = graded(make([ok_step(0)], RIGHT), RewardConfig(weights=(1, 0, 0, 0)))
    assert t.reward.total == 1.0 and t.reward.weights == (1, 0, 0, 0)


def test_an_episode_the_harness_broke_on_is_failed_not_a_fault():
    # harness_error: an exception while handling what the model wrote; it counts against the
    # episode even when the verifier would have accepted it.
    out = grade(make([ok_step(0)], RIGHT, end="harness_error"))
    assert (out.tier, out.fail_reason) == ("failed", "harness_error")


def test_notes_never_count_as_the_fault_that_ended_an_episode():
    from trajforge.schema import Fault

    t = make([ok_step(0)], None, end="env_fault")
    t.faults = [Fault(kind="tool_timeout"), Fault(kind="record_degraded"), Fault(kind="grade_error")]
    assert (grade(t).tier, grade(t).fail_reason) == ("env_fault", "tool_timeout")


def test_grading_is_total(monkeypatch):
    import trajforge.grade as g

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a reward component divided by zero")

    monkeypatch.setattr(g, "reward", broken)
    t = g.graded(make([ok_step(0)], RIGHT))
    assert (t.outcome.tier, t.outcome.fail_reason) == ("failed", "grade_error")
    assert t.reward.total == 0.0 and t.faults[-1].kind == "grade_error"
    assert "ZeroDivisionError" in t.faults[-1].message
