"""The episode loop against the real SQL environment, with a scripted model."""

import json

from trajforge.eval.run import collect
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies.expert import ExpertPolicy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.store import TrajectoryStore
from trajforge.tasks import synthesize


def call(name, **args):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


def tasks(n=30):
    return synthesize("sql", n, seed=1).tasks


def test_expert_solves_every_task_with_real_results():
    pool = tasks()
    trajs = run_episodes(pool, ExpertPolicy())
    assert len(trajs) == len(pool)
    assert all(t.verdict.correct for t in trajs), [t.verdict for t in trajs if not t.verdict.correct]
    t = trajs[0]
    assert t.end == "submitted" and t.messages[0].role == "system" and t.messages[1].content == pool[0].prompt
    # Tool messages hold the environment's real output.
    assert any(m.role == "tool" and "rows)" in m.content for t in trajs for m in t.messages)


def test_errors_are_fed_back_and_episode_recovers():
    task = tasks()[0]
    ref = task.reference
    script = ["I think the answer is 3.",                                  # no call
              call("run_sq", query="SELECT 1"),                            # unknown tool
              call("run_sql"),                                             # missing argument
              call("run_sql", query="SELECT nope FROM nowhere")]           # SQL error (tool error)
    script += [call(c.name, **c.arguments) for c in ref]
    pol = ScriptedPolicy(script)
    [t] = run_episodes([task], pol, HarnessConfig(max_turns=12, max_consecutive_errors=5))
    assert t.verdict.correct and t.end == "submitted"
    kinds = [e.kind for s in t.steps for e in s.errors]
    assert kinds == ["no_call", "unknown_tool", "invalid_args"]
    tool_msgs = [m.content for m in t.messages if m.role == "tool"]
    assert tool_msgs[0].startswith("Error (no_call)") and "Did you mean 'run_sql'" in tool_msgs[1]
    assert "missing required argument 'query'" in tool_msgs[2]
    assert t.steps[3].results[0].ok is False and t.steps[3].results[0].error == "no_such_table"
    # The invalid call was never dispatched.
    assert t.steps[2].results == []


def test_consecutive_errors_end_the_episode():
    [t] = run_episodes(tasks()[:1], ScriptedPolicy(["no tools here"]), HarnessConfig(max_consecutive_errors=2))
    assert t.end == "max_errors" and len(t.steps) == 2 and not t.verdict.submitted


def test_max_turns():
    [t] = run_episodes(tasks()[:1], ScriptedPolicy([call("list_tables")]), HarnessConfig(max_turns=3, max_repeats=9))
    assert t.end == "max_turns" and len(t.steps) == 3


def test_a_turn_repeated_with_the_same_result_ends_the_episode():
    """A greedy model that repeats a call and gets the same result loops to max_turns; the
    harness stops it after ``max_repeats`` repeats and the grade says so."""
    from trajforge.grade import graded

    stuck = call("run_sql", query="SELECT name FROM customers WHERE city = 'Nowhere'")
    [t] = run_episodes(tasks()[:1], ScriptedPolicy([call("list_tables"), stuck]), HarnessConfig(max_turns=12))
    assert t.end == "repeated" and len(t.steps) == 4  # list_tables, then the query three times
    assert graded(t).outcome.fail_reason == "repeated_call"  # the empty result itself is no error
    # The same call with another result is progress (a stateful tool), never a repeat; nor is a
    # turn whose call differs, however alike the text.
    [t] = run_episodes(tasks()[:1], ScriptedPolicy([call("list_tables")]), HarnessConfig(max_turns=5, max_repeats=1))
    assert t.end == "repeated" and len(t.steps) == 2
    queries = [call("run_sql", query=f"SELECT {i}") for i in range(5)]
    [t] = run_episodes(tasks()[:1], ScriptedPolicy(queries), HarnessConfig(max_turns=5, max_repeats=1))
    assert t.end == "max_turns"


def test_a_repeat_needs_the_same_results():
    from trajforge.harness.loop import repeats
    from trajforge.schema import Step, ToolCall, ToolResult

    def step(content, args=None):
        return Step(index=0, raw="", calls=[ToolCall(name="poll", arguments=args or {"job": 1})],
                    results=[ToolResult(name="poll", content=content)])
    assert repeats(step("running"), step("running"))
    assert not repeats(step("done"), step("running"))
    assert not repeats(step("running", {"job": 2}), step("running"))
    assert not repeats(Step(index=1, raw="no call"), Step(index=0, raw="no call"))  # no calls: max_errors' business


def test_collect_resume_makes_no_model_calls(tmp_path):
    pool = tasks(10)
    first = ScriptedPolicy(["nothing"], name="s")
    collect(pool, first, tmp_path, samples=2, harness=HarnessConfig(max_consecutive_errors=1), show_progress=False)
    assert first.calls == 2 * len(pool)
    again = ScriptedPolicy(["nothing"], name="s")
    assert collect(pool, again, tmp_path, samples=2, show_progress=False) == [] and again.calls == 0
    more = ScriptedPolicy(["nothing"], name="s")
    collect(pool, more, tmp_path, samples=3, harness=HarnessConfig(max_consecutive_errors=1), show_progress=False)
    assert more.calls == len(pool)  # only the missing third sample ran
    trajs = TrajectoryStore(tmp_path).read()
    assert len(trajs) == 3 * len(pool) and all(t.outcome.fail_reason == "no_call" for t in trajs)
