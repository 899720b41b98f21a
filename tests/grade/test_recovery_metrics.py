"""Recovery and first-error rates, and the paired test recipes are compared with."""

import pytest

from trajforge.grade.metrics import summarize

def test_recovery_and_first_error_rates_count_troubled_episodes():
    from trajforge.grade import graded
    from trajforge.harness import run_episodes
    from trajforge.policies import make_policy
    from trajforge.policies.repair import RepairPolicy
    from trajforge.policies.scripted import ScriptedPolicy
    from trajforge.tasks import synthesize
    from trajforge.tasks.repair import Planner

    pool = [t for t in synthesize("sql", 40, seed=0).tasks if t.split == "train"]
    tasks = pool[:4]
    recovered = [graded(t) for t in run_episodes(tasks, RepairPolicy(Planner(pool)))]
    clean = [graded(t) for t in run_episodes(tasks, make_policy("expert"))]
    broken = [graded(t) for t in run_episodes(tasks[:2], ScriptedPolicy(["not a call"] * 3))]
    m = summarize(recovered + clean + broken)
    # Troubled: the 4 repair episodes (recovered) and the 2 broken ones (failed); clean ones are not.
    assert m["recovery"]["n"] == 6 and m["recovery"]["k"] == 4
    assert m["recovery_rate"] == pytest.approx(4 / 6)
    # Only the broken episodes err on their very first turn (a repair mistake comes later or is marked).
    assert m["first_error_rate"] == pytest.approx(sum(
        1 for t in recovered + broken if t.steps[0].errors or not all(r.ok for r in t.steps[0].results)) / 10)
    assert summarize(clean)["recovery"]["n"] == 0


def test_paired_p_is_the_exact_mcnemar_test():
    from trajforge.grade.metrics import paired_p

    assert paired_p(0, 0) == 1.0
    assert paired_p(5, 5) == 1.0
    assert paired_p(6, 0) == pytest.approx(2 / 64)  # all six discordant tasks one way
    assert paired_p(9, 1) == pytest.approx(2 * 11 / 1024)
    assert paired_p(1, 9) == paired_p(9, 1)
    assert paired_p(3, 1) > 0.05
