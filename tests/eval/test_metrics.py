import pytest

from trajforge.eval import evaluate, wilson
from trajforge.grade import graded
from trajforge.schema import CallError, Step, ToolCall, ToolResult, Trajectory


def test_wilson_known_values():
    lo, hi = wilson(12, 12)
    assert lo == pytest.approx(0.7575, abs=1e-3) and hi == 1.0
    lo, hi = wilson(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-3), pytest.approx(0.7634, abs=1e-3))
    assert wilson(0, 0) == (0.0, 1.0)


def ep(tier, correct, steps):
    return graded(Trajectory(task_id="t", policy="p", env="sql", toolset_fingerprint="f", dialect="hermes",
                             tier=tier, steps=steps, end="submitted",
                             verdict={"submitted": True, "correct": correct, "milestones": []}))


GOOD = Step(index=0, raw="", calls=[ToolCall(name="a")], results=[ToolResult(name="a", content="")])
BAD = Step(index=0, raw="", errors=[CallError(kind="no_call", message="")])


def test_evaluate_overall_and_tiers():
    m = evaluate([ep("easy", True, [GOOD, GOOD]), ep("easy", False, [BAD, GOOD]), ep("hard", True, [GOOD])])
    assert m["n"] == 3 and m["completion"] == pytest.approx(2 / 3)
    assert m["validity"] == pytest.approx(4 / 5) and m["avg_turns"] == pytest.approx(5 / 3)
    assert m["tiers"]["easy"]["completion"] == 0.5 and m["tiers"]["hard"]["n"] == 1
    # The sql environment's finer kind: it submitted without any result that held the answer.
    assert m["fail_reasons"] == {"guessed_answer": 1}


def test_pass_at_k_hand_worked():
    from trajforge.grade.metrics import pass_at_k

    # n=4, c=1: pass@1 = 1/4; pass@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6; pass@4 = 1 (the one is always drawn)
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(4, 1, 4) == 1.0
    assert pass_at_k(4, 0, 4) == 0.0
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    with pytest.raises(ValueError, match="n=2, c=0, k=3"):
        pass_at_k(2, 0, 3)


def sampled(task_id, correct):
    return ep("easy", correct, [GOOD]).model_copy(update={"task_id": task_id})


def test_pass_curve_in_evaluate():
    # task a: 1 of 4 right; task b: 4 of 4; task c: 0 of 4 → pass@1 = (0.25+1+0)/3, pass@2 = (0.5+1+0)/3
    runs = [sampled("a", i == 0) for i in range(4)] + [sampled("b", True) for _ in range(4)] \
        + [sampled("c", False) for _ in range(4)]
    m = evaluate(runs)
    assert m["pass_at_k"] == {1: pytest.approx(1.25 / 3, abs=1e-4), 2: pytest.approx(0.5, abs=1e-4),
                              4: pytest.approx(2 / 3, abs=1e-4)}
    assert m["completion"] == pytest.approx(5 / 12)  # pass@1 is the plain completion rate
    assert "pass_at_k" not in evaluate(runs[:1] + runs[4:5])  # one sample per task: no curve
