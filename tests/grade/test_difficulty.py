"""tier_by_solve_rate: tiers from how often a policy solves each task over k samples."""

from __future__ import annotations

from collections import Counter

import pytest

from trajforge.grade.difficulty import solve_rates, tier_by_solve_rate, tier_for_rate
from trajforge.parse import get_dialect
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.tasks import synthesize

HERMES = get_dialect("hermes")


def test_tiers_follow_the_measured_solve_rate():
    always, sometimes, never = synthesize("sql", 20, seed=0).tasks[:3]
    episodes: Counter[str] = Counter()
    ordinal: dict[int, int] = {}  # an episode's message list -> its number among its task's

    def act(req):
        """Replay the reference, except: `never` always submits nonsense; `sometimes` does so in
        two of its three episodes."""
        task = req.task
        if id(req.messages) not in ordinal:
            episodes[task.id] += 1
            ordinal[id(req.messages)] = episodes[task.id]
        first = ordinal[id(req.messages)] == 1
        wrong = task.id == never.id or (task.id == sometimes.id and not first)
        if wrong:
            call = task.reference[-1].model_copy(update={"arguments": {"answer": "no idea"}})
            return HERMES.render_assistant("", [call])
        return HERMES.render_assistant("", [task.reference[req.turn]])

    tiered = tier_by_solve_rate([always, sometimes, never], ScriptedPolicy(act), k=3)
    assert [t.tier for t in tiered] == ["easy", "medium", "hard"]
    assert [t.id for t in tiered] == [always.id, sometimes.id, never.id]
    assert sum(episodes.values()) == 9


def test_rates_and_thresholds():
    assert [tier_for_rate(r) for r in (1.0, 2 / 3, 0.5, 1 / 3, 0.0)] == [
        "easy", "easy", "medium", "medium", "hard"]
    with pytest.raises(ValueError, match="k must be at least 1"):
        solve_rates([], ScriptedPolicy([""]), k=0)
