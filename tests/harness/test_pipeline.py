"""Multi-agent pipelines on the real SQL environment, each role driven by its own scripted policy."""

import json

import pytest
from pydantic import BaseModel, field_validator

from tests.tiny import build_tiny_model
from trajforge.envs.sql.results import read_result
from trajforge.grade import graded
from trajforge.harness.pipeline import (HANDOFF, Pipeline, Role, Selection, role_view, run_pipeline,
                                        sql_research_pipeline)
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.tasks import synthesize


def call(name, **args):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


def handed(req):
    """The JSON the previous role handed over, as it appears in this role's prompt."""
    return json.loads(req.messages[1].content.split(": ", 2)[-1].split("\n")[0])


def last_result(req):
    return next(m.content for m in reversed(req.messages) if m.role == "tool")


def gatherer(req):
    query = [c for c in req.task.reference if c.name == "run_sql"][-1].arguments["query"]
    if req.turn == 0:
        return "I'll query it.\n" + call("run_sql", query=query)
    return call(HANDOFF, query=query, result=last_result(req))


def analyst(req):
    rows = read_result(handed(req)["result"])
    value = ", ".join(r[0] for r in rows) if len(rows) > 1 else rows[0][0]
    return call(HANDOFF, answer=value, reason=f"{len(rows)} row(s)")


def writer(req):
    return call("submit_answer", answer=handed(req)["answer"])


class Counting(ScriptedPolicy):
    """A scripted policy that remembers the batch sizes it was asked for."""

    def __init__(self, script, name):
        super().__init__(script, name=name)
        self.batches = []

    def act(self, requests):
        self.batches.append(len(requests))
        self.requests = getattr(self, "requests", []) + list(requests)
        return super().act(requests)


def simple_tasks(n=6):
    return [t for t in synthesize("sql", 40, seed=3).tasks if len(t.reference) == 2][:n]


def test_three_roles_solve_tasks_in_one_trajectory_each():
    tasks = simple_tasks()
    pols = [Counting(gatherer, "g"), Counting(analyst, "a"), Counting(writer, "w")]
    pipe = sql_research_pipeline(*pols)
    trajs = [graded(t) for t in run_pipeline(tasks, pipe)]
    assert [t.task_id for t in trajs] == [t.id for t in tasks]
    for t in trajs:
        assert t.verdict.correct, t.verdict
        assert t.end == "submitted" and t.outcome.tier == "success" and t.outcome.failed_role is None
        assert [s.role_name for s in t.steps] == ["gatherer", "gatherer", "analyst", "writer"]
        assert [s.index for s in t.steps] == [0, 1, 2, 3]
        assert all(m.role_name for m in t.messages)
        assert t.policy == "sql-research" and t.dialect == "hermes"
    # Every role got its batch at once, and saw only its own tools (plus handoff where it hands off).
    assert pols[0].batches == [6, 6] and pols[1].batches == [6] and pols[2].batches == [6]
    assert pols[0].requests[0].toolset.names == ["list_tables", "describe_table", "run_sql", HANDOFF]
    assert pols[1].requests[0].toolset.names == [HANDOFF]
    assert pols[2].requests[0].toolset.names == ["submit_answer"]
    # Each role's conversation starts with its own system turn and prompt; the analyst was shown
    # the gatherer's validated output, and the real rows are in it.
    t = trajs[0]
    analyst_msgs = [m for m in t.messages if m.role_name == "analyst"]
    assert analyst_msgs[0].role == "system" and "pick the exact value" in analyst_msgs[0].content
    shown = json.loads(analyst_msgs[1].content.split("rows: ", 1)[1])
    assert set(shown) == {"query", "result"} and shown["result"].endswith(("row)", "rows)"))


def test_channel_type_is_enforced_before_the_next_role_sees_it():
    class Count(BaseModel):
        """A count of things."""

        value: int

        @field_validator("value")
        @classmethod
        def not_negative(cls, v):
            if v < 0:
                raise ValueError("a count cannot be negative")
            return v

    seen = []

    def first(req):
        return call(HANDOFF, value=-3) if req.turn == 0 else call(HANDOFF, value=4)

    def second(req):
        seen.append(req.messages[1].content)
        return call("submit_answer", answer="4")

    pipe = Pipeline(name="count", env="sql", roles=(
        Role(name="counter", policy=ScriptedPolicy(first), tools=(), output=Count, prompt="{task}"),
        Role(name="reporter", policy=ScriptedPolicy(second), tools=("submit_answer",), prompt="Got {input}"),
    ))
    assert "a count of things" in pipe.toolset("counter").get(HANDOFF).description.lower()
    [t] = run_pipeline(simple_tasks(1), pipe)
    bad = t.steps[0].results[0]
    assert not bad.ok and bad.error == "invalid_handoff" and "a count cannot be negative" in bad.content
    # The rejection went back to the counter as a tool message, and it fixed its handoff.
    assert "handoff rejected" in [m for m in t.messages if m.role == "tool"][0].content
    # No query ran, so the reporter's first submission is refused (SqlEnv.refuse_unsupported) and it
    # submits again, seeing the same checked handoff.
    assert seen == ['Got {"value":4}'] * 2
    assert [s.role_name for s in t.steps] == ["counter", "counter", "reporter", "reporter"]


def test_a_failing_role_is_named_in_the_outcome():
    tasks = simple_tasks(2)
    mute = ScriptedPolicy(["I think the answer is probably in there somewhere."], name="mute")
    [t, _] = [graded(x) for x in run_pipeline(tasks, sql_research_pipeline(
        ScriptedPolicy(gatherer), mute, ScriptedPolicy(writer)))]
    assert t.end == "max_errors" and not t.verdict.submitted
    assert [s.role_name for s in t.steps] == ["gatherer", "gatherer", "analyst", "analyst"]
    assert t.outcome.tier == "failed" and t.outcome.fail_reason == "no_call" and t.outcome.failed_role == "analyst"

    # A writer that submits something else: the wrong answer is the writer's.
    liar = ScriptedPolicy(lambda req: call("submit_answer", answer="42 bananas"))
    pipe = sql_research_pipeline(ScriptedPolicy(gatherer), ScriptedPolicy(analyst), liar)
    t = graded(run_pipeline(tasks[:1], pipe)[0])
    assert t.outcome.fail_reason == "logic_break" and t.outcome.failed_role == "writer"  # the answer was seen

    # A gatherer reaching for a tool outside its subset is refused (never dispatched) and blamed.
    greedy = ScriptedPolicy(lambda req: call("submit_answer", answer="9"))
    pipe = sql_research_pipeline(greedy, ScriptedPolicy(analyst), ScriptedPolicy(writer))
    t = graded(run_pipeline(tasks[:1], pipe)[0])
    assert [e.kind for s in t.steps for e in s.errors] == ["unknown_tool", "unknown_tool"]
    assert not t.verdict.submitted and t.outcome.failed_role == "gatherer"


def test_role_view_is_one_roles_training_sample():
    from transformers import AutoTokenizer

    from trajforge.train.data import render_sample

    tasks = simple_tasks(1)
    pipe = sql_research_pipeline(ScriptedPolicy(gatherer, name="g"), ScriptedPolicy(analyst, name="a"),
                                 ScriptedPolicy(writer, name="w"))
    [t] = run_pipeline(tasks, pipe)
    view = pipe.role_view(t, "gatherer")
    assert [s.index for s in view.steps] == [0, 1] and {m.role_name for m in view.messages} == {"gatherer"}
    assert view.toolset_fingerprint == pipe.toolset("gatherer").fingerprint and view.policy == "g"
    assert view.verdict == t.verdict
    with pytest.raises(KeyError, match="roles with turns: \\['analyst', 'gatherer', 'writer'\\]"):
        role_view(t, "editor")

    # Rendered for SFT with the role's own toolset, the loss covers exactly the gatherer's turns.
    import tempfile
    from pathlib import Path

    tok = AutoTokenizer.from_pretrained(build_tiny_model(Path(tempfile.mkdtemp()) / "m"))
    sample = render_sample(view, tok, pipe.toolset("gatherer"))
    learned = tok.decode([i for i, m in zip(sample.input_ids, sample.loss_mask) if m])
    assert learned == "".join(s.raw + "<|im_end|>" for s in view.steps)
    assert "<tools>" in tok.decode(sample.input_ids) and '"handoff"' in tok.decode(sample.input_ids)
    assert "submit_answer" not in tok.decode(sample.input_ids)


def test_a_role_view_is_stored_with_its_own_toolset(tmp_path):
    from trajforge.envs import toolset_for
    from trajforge.grade import graded
    from trajforge.store import TrajectoryStore

    pipe = sql_research_pipeline(ScriptedPolicy(gatherer, name="g"), ScriptedPolicy(analyst, name="a"),
                                 ScriptedPolicy(writer, name="w"))
    [t] = run_pipeline(simple_tasks(1), pipe)
    views = [graded(pipe.role_view(t, r.name)) for r in pipe.roles]
    TrajectoryStore(tmp_path).append(views[0])
    TrajectoryStore(tmp_path).append(views[2])
    stored = TrajectoryStore(tmp_path)
    back = {v.toolset_fingerprint: v for v in stored.read()}
    assert sorted(stored.toolsets.fingerprints()) == sorted(back)  # one toolset file per role view
    gather = toolset_for(views[0].toolset_fingerprint)
    assert gather == pipe.toolset("gatherer") and "handoff" in gather.names
    assert gather.instructions == pipe.role("gatherer").instructions == views[0].messages[0].content
    assert toolset_for(views[2].toolset_fingerprint).names == ["submit_answer"]


@pytest.mark.parametrize("roles,message", [
    ([dict(name="a", tools=("drop_db",))], "lacks"),
    ([dict(name="a", output=Selection)], "is last"),
    ([dict(name="a"), dict(name="b")], "needs an output type"),
    ([dict(name="a", prompt="{task} {oops}")], "oops"),
    ([dict(name="a", prompt="{input}")], "is first"),
    ([dict(name="a", output=Selection), dict(name="a")], "unique"),
])
def test_bad_pipelines_are_refused(roles, message):
    built = tuple(Role(**{"policy": ScriptedPolicy(["x"]), "prompt": "{task}", **r}) for r in roles)
    with pytest.raises(ValueError, match=message):
        Pipeline(name="p", env="sql", roles=built)
