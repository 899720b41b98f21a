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
    assert m["fail_reasons"] == {"wrong_answer": 1}
