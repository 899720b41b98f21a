"""Guided exploration rewinds a failing episode to its last good step and resamples cooler."""

from tests.train.rollouts import reply
from trajforge.grade import graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.harness.explore import ExplorationConfig, guided, rescue_rate
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.tasks import synthesize


def _policy():
    """Good first turn; then, while hot, broken calls; once cooled by a rescue, the reference."""
    def act(req):
        if req.turn == 0 or req.temperature == 0.3:
            return reply(req, wrong=False)
        return '<tool_call>{"name": "run_sql", "arguments": {"query": "SELEC nonsense"}}</tool_call>'
    return ScriptedPolicy(act)


def test_rescue_turns_a_failing_episode_into_a_success():
    tasks = [t for t in synthesize("sql", 30, seed=1).tasks if len(t.reference) >= 3][:4]
    cfg = HarnessConfig(max_turns=6)
    plain = [graded(t) for t in run_episodes(tasks, _policy(), cfg)]
    assert not any(t.outcome.correct for t in plain)
    trajs = [graded(t) for t in run_episodes(tasks, _policy(), cfg, episode=guided(ExplorationConfig()))]
    assert all(t.outcome.correct for t in trajs)
    for t in trajs:
        (rescue,) = t.rescues
        assert rescue.restored_to == 1 and rescue.temperature == 0.3
        assert len(rescue.discarded) == 2 and all(s.results and not s.results[0].ok for s in rescue.discarded)
        assert "SELEC" not in " ".join(m.content or "" for m in t.messages)  # conversation rewound
    assert rescue_rate(trajs) == {"episodes": 4, "rescued": 4, "rescued_solved": 4, "rescue_success_rate": 1.0}


def test_rescues_are_bounded():
    tasks = synthesize("sql", 10, seed=1).tasks[:2]
    always_bad = ScriptedPolicy(["not a call"])
    trajs = run_episodes(tasks, always_bad, HarnessConfig(max_turns=8, max_consecutive_errors=3),
                         episode=guided(ExplorationConfig(max_rescues=2)))
    for t in trajs:
        assert len(t.rescues) == 2 and t.end in ("max_errors", "max_turns")
