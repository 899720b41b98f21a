"""LLM synthesis for the code environment: the writer supplies hidden tests, the executed
reference solution must pass them in the sandbox, weak or malformed tests are rejected."""

from __future__ import annotations

import json

from tests.conftest import require_system
from tests.scripted_chat import ScriptedChatServer
from tests.tasks.test_llm import cfg
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies import make_policy
from trajforge.tasks import synthesize
from trajforge.tasks.llm import example_json, synthesize_llm

GOOD = "def double_all(xs):\n    return [2 * x for x in xs]\n"
WRONG = "def double_all(xs):\n    return xs\n"
TESTS = {"module": "solution", "function": "double_all", "cases": [
    {"args": [[1, 2]], "expected": [2, 4]}, {"args": [[]], "expected": []},
    {"args": [[5]], "expected": [10]}, {"args": [[-1, 0]], "expected": [-2, 0]}]}


def reply(prompt: str, solution: str, **extra) -> str:
    plan = [{"name": "write_file", "arguments": {"path": "solution.py", "content": solution}},
            {"name": "run_tests", "arguments": {}}, {"name": "submit", "arguments": {}}]
    return json.dumps({"prompt": prompt, "plan": plan, "tier": "easy", **extra})


def test_code_tasks_keep_only_tests_their_reference_passes():
    require_system("bwrap", "bubblewrap")
    examples = synthesize("code", 4, seed=0).tasks
    assert '"expected"' in example_json(examples[0])  # the writer sees the tests' shape
    weak = {**TESTS, "cases": [{"args": [[1]], "expected": 0}, {"args": [[2]], "expected": 0}]}
    script = [
        reply("Write double_all(xs) in solution.py returning each number doubled.", GOOD, expected=TESTS),
        reply("Write double_all(xs) that doubles every element of a list.", WRONG, expected=TESTS),
        # (distinct solutions, so the plan de-duplication doesn't answer first)
        reply("Implement double_all(xs): a new list with each value times two.", GOOD + "# b\n"),
        reply("Write a function double_all that multiplies list items by 2.", GOOD + "# c\n",
              expected=weak),
        reply("Create double_all(xs) returning the doubled values of xs.", GOOD + "# d\n",
              expected={"function": "double_all"}),
    ]
    with ScriptedChatServer(script) as srv:
        report = synthesize_llm("code", 5, cfg(srv.url, max_requests=len(script)), examples=examples)
    assert [(r.source, r.reason) for r in report.rejected] == [
        ("request 2", "verify_failed"), ("request 3", "no_tests"), ("request 4", "weak_tests"),
        ("request 5", "bad_tests")]
    [task] = report.tasks
    assert task.env == "code" and task.expected["cases"] == TESTS["cases"]
    [traj] = run_episodes([task], make_policy("expert"), HarnessConfig(max_turns=4))
    assert traj.verdict.correct
