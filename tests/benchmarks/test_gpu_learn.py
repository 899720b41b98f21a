"""benchmarks/gpu_learn.py's bimodal testbed: a wrong-answer copy of an expert episode, replayed
through the real SQL environment, must fail where the original succeeds, and differ from it only
in what its last turn submits."""

from benchmarks.gpu_learn import wrong_answer_copies
from trajforge.eval.run import collect
from trajforge.grade import graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies import make_policy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.tasks import synthesize


def test_wrong_answer_copies_fail_only_at_the_submitted_answer(tmp_path):
    train = [t for t in synthesize("sql", 40, seed=1).tasks if t.split == "train"][:6]
    expert = collect(train, make_policy("expert"), tmp_path / "expert", show_progress=False)
    copies = wrong_answer_copies(expert)
    assert len(copies) == len(expert)
    by_task = {c.task_id: c for c in copies}
    for orig in expert:
        copy = by_task[orig.task_id]
        assert copy.messages[:-2] == orig.messages[:-2] and copy.steps[:-1] == orig.steps[:-1]
        right, wrong = (t.steps[-1].calls[0].arguments["answer"] for t in (orig, copy))
        assert right != wrong and wrong in copy.steps[-1].raw and wrong in copy.messages[-2].content

    # replayed turn by turn from the copies' raw texts, the harness executes the wrong submissions
    replay = ScriptedPolicy(lambda req: by_task[req.task.id].steps[req.turn].raw)
    replayed = [graded(t) for t in run_episodes(train, replay, HarnessConfig(max_turns=6))]
    assert [t.outcome.correct for t in expert] == [True] * len(expert)
    assert [t.outcome.correct for t in replayed] == [False] * len(replayed)
