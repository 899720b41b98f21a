"""The fail-reason taxonomy: every reason is documented once, and the finer kinds of a wrong answer
come out of real episodes in each environment (scripted calls, real tools, real verifiers)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import trajforge
from tests.conftest import require_system
from tests.envs.web.test_web import SHOE
from trajforge.envs.registry import EnvSpec, register, unregister
from trajforge.envs.sql.hints import error_kind
from trajforge.envs.web.shop.goals import MISMATCH_KINDS
from trajforge.grade import graded
from trajforge.grade.outcome import FAIL_REASONS, grade
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.schema import Step, Task, ToolCall, ToolResult, Trajectory, Verdict
from trajforge.tasks import synthesize

ENVS = Path(trajforge.__file__).parent / "envs"
SYNTHESIS_HOOKS = {"expected_outcome", "check_expected"}
"""ToolErrors raised there are synthesis rejections (``no_final_call``...), never an episode's."""


def call(name, **args):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


def episode(task: Task, script: list[str], max_turns: int = 20) -> Trajectory:
    [t] = run_episodes([task], ScriptedPolicy(script), HarnessConfig(max_turns=max_turns))
    return graded(t)


# ---- the table -----------------------------------------------------------------------------------

def _declared_kinds() -> dict[str, str]:
    """Every literal error kind under trajforge/envs: ``ToolError(msg, kind=...)``, ``InfraError``
    kinds (arguments and class attributes), outside the synthesis hooks; kind -> where."""
    found: dict[str, str] = {}
    for path in ENVS.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name in SYNTHESIS_HOOKS
                   for n in ast.walk(f)}
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("ToolError", "InfraError"):
                for kw in node.keywords:
                    if kw.arg == "kind" and isinstance(kw.value, ast.Constant):
                        found[kw.value.value] = f"{path.name}:{node.lineno}"
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if (isinstance(stmt, ast.Assign) and [getattr(t, "id", None) for t in stmt.targets] == ["kind"]
                            and isinstance(stmt.value, ast.Constant)):
                        found[stmt.value.value] = f"{path.name}:{stmt.lineno}"
    return found


def test_every_error_kind_the_environments_raise_is_a_documented_fail_reason():
    kinds = _declared_kinds()
    assert {"no_such_table", "bad_url", "unknown_city", "not_found", "sql_worker", "sandbox"} <= set(kinds)
    undocumented = {k: where for k, where in kinds.items() if k not in FAIL_REASONS}
    assert not undocumented, f"add these to grade/outcome.py FAIL_REASONS: {undocumented}"
    sql_kinds = {error_kind(m) for m in ("no such table: x", "no such column: y", "no such function: f",
                                         "ambiguous column name: id", "not authorized", "interrupted",
                                         'near "x": syntax error', "misuse of aggregate")}
    assert sql_kinds <= set(FAIL_REASONS) and "sql_error" in sql_kinds
    assert {kind for _, kind in MISMATCH_KINDS} <= set(FAIL_REASONS)
    assert all(meaning and len(meaning) < 100 for meaning in FAIL_REASONS.values())


def test_a_wrong_answer_without_a_finer_kind_is_plain_wrong_answer():
    wrong = Verdict(submitted=True, answer="8")
    steps = [Step(index=0, raw="", calls=[ToolCall(name="f")], results=[ToolResult(name="f", content="1")])]
    for env in ("mcp:tools.json", "not-installed-here"):
        t = Trajectory(task_id="t", policy="p", env=env, toolset_fingerprint="f", dialect="hermes",
                       steps=steps, verdict=wrong, end="submitted")
        assert grade(t).fail_reason == "wrong_answer"

    def broken(traj):
        raise RuntimeError("a hook that fails must not fail grading")

    register(EnvSpec(name="broken-hook", env=trajforge.Environment, wrong_answer=broken))
    try:
        t = t.model_copy(update={"env": "broken-hook"})
        assert grade(t).fail_reason == "wrong_answer"
    finally:
        unregister("broken-hook")


# ---- sql -----------------------------------------------------------------------------------------

SQL_TASK = Task(id="s", env="sql", prompt="How many?", tier="easy", split="train", template="x",
                reference=(), expected=7, seed=0)


@pytest.mark.parametrize("script,reason", [
    ([call("submit_answer", answer="8")], "guessed_answer"),
    ([call("run_sql", query="SELECT price FROM products WHERE name = 'No Such Thing'"),
      call("submit_answer", answer="0")], "empty_result_submitted"),
    ([call("run_sql", query="SELECT count(*) FROM customers WHERE name = 'Nobody'"),
      call("submit_answer", answer="0")], "empty_result_submitted"),  # a lone 0, submitted
    ([call("run_sql", query="SELECT count(*) - 113 FROM customers"),   # 7: the answer was seen
      call("run_sql", query="SELECT count(*) FROM customers"), call("submit_answer", answer="120")],
     "logic_break"),
    ([call("run_sql", query="SELECT count(*) FROM customers"), call("submit_answer", answer="120")],
     "retrieval_miss"),
    ([call("run_sql", query="SELECT nme FROM customers")] * 3, "no_such_column"),  # stuck on it
    ([call("run_sql", query="SELECT * FROM customer")] * 3, "no_such_table"),
    ([call("run_sql", query="SELEC 1")] * 3, "syntax_error"),
])
def test_sql_failures_get_their_own_reason(script, reason):
    t = episode(SQL_TASK, script, max_turns=3)
    assert t.outcome.tier == "failed" and t.outcome.fail_reason == reason, t.verdict


# ---- travel --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def flight_task() -> Task:
    pool = synthesize("travel", 40, seed=0).tasks
    return next(t for t in pool if len(t.expected["bookings"]) == 1 and not t.entities.get("existing")
                and t.expected["bookings"][0]["kind"] == "flight"
                and [c.name for c in t.reference] == ["search_flights", "book_flight", "finish"])


def _search_call(task: Task) -> str:
    search = next(c for c in task.reference if c.name == "search_flights")
    return call("search_flights", **search.arguments)


def test_travel_failures_get_their_own_reason(flight_task):
    want = flight_task.expected["bookings"][0]
    finish = call("finish", summary="done")
    book_wanted = call("book_flight", flight_id=want["item"], passenger=want["name"])
    assert episode(flight_task, [_search_call(flight_task), book_wanted, finish]).outcome.tier == "success"
    assert episode(flight_task, [finish]).outcome.fail_reason == "retrieval_miss"
    assert episode(flight_task, [_search_call(flight_task), finish]).outcome.fail_reason == "missing_booking"
    assert episode(flight_task, [_search_call(flight_task), book_wanted,
                                 call("book_flight", flight_id=want["item"], passenger="Someone Else"),
                                 finish]).outcome.fail_reason == "extra_booking"
    # The search listed the wanted flight, yet another of its flights was booked instead.
    listing = run_episodes([flight_task], ScriptedPolicy([_search_call(flight_task), finish]))[0]
    shown = [line.split(" | ")[0] for m in listing.messages if m.role == "tool"
             for line in m.content.splitlines() if " | " in line]
    other = next(f for f in shown if f != want["item"])
    t = episode(flight_task, [_search_call(flight_task),
                              call("book_flight", flight_id=other, passenger=want["name"]), finish])
    assert t.outcome.fail_reason == "logic_break", t.verdict.detail


# ---- web -----------------------------------------------------------------------------------------

def _web_task(shipping: str = "express") -> Task:
    goal = {"kind": "order", "shipping": shipping,
            "items": [{"product": SHOE.id, "name": SHOE.name, "color": SHOE.colors[1],
                       "size": SHOE.sizes[1], "quantity": 1}]}
    return Task(id="web-f", env="web", prompt=f"Buy {SHOE.name}", tier="easy", split="train",
                template="t", reference=(), expected=goal, seed=0)


def _buy(name: str, options: dict[str, str], shipping: str) -> list[str]:
    return [call("open", url="/"), call("type", field="q", text=name), call("submit"),
            call("click", element=name), *[call("type", field=k, text=v) for k, v in options.items()],
            call("click", element="Add to cart"), call("click", element="Proceed to checkout"),
            call("type", field="shipping", text=shipping), call("click", element="Place order")]


def test_web_failures_get_their_own_reason():
    from trajforge.envs.web.shop.catalog import build_catalog

    shoe = {"color": SHOE.colors[1], "size": SHOE.sizes[1]}
    assert episode(_web_task(), _buy(SHOE.name, shoe, "express")).outcome.tier == "success"
    assert episode(_web_task(), _buy(SHOE.name, shoe, "standard")).outcome.fail_reason == "wrong_form_value"
    wrong_color = {**shoe, "color": SHOE.colors[0]}
    assert episode(_web_task(), _buy(SHOE.name, wrong_color, "express")).outcome.fail_reason == "wrong_item"
    other = next(p for p in build_catalog(0).products if not p.sizes and p.stock >= 3 and p.id != SHOE.id)
    t = episode(_web_task(), _buy(other.name, {"color": other.colors[0]} if other.colors else {}, "express"))
    assert t.outcome.fail_reason == "retrieval_miss", t.verdict.detail


# ---- code ----------------------------------------------------------------------------------------

CODE_TASK = Task(id="c", env="code", prompt="Write double(x)", tier="easy", split="train", template="x",
                 reference=(), expected={"function": "double", "case_timeout_s": 0.5, "cases": [
                     {"args": [1], "expected": 2}, {"args": [2], "expected": 4}]})


@pytest.mark.parametrize("source,reason", [
    ("def double(x):\n    return 2 * x\n", None),
    ("def double(x)\n    return 2 * x\n", "syntax_error"),
    ("def double(x):\nreturn 2 * x\n", "syntax_error"),
    ("import no_such_module_here\ndef double(x):\n    return 2 * x\n", "import_error"),
    ("def twice(x):\n    return 2 * x\n", "missing_function"),
    ("def double(x):\n    return x + 1\n", "tests_failed"),
    ("def double(x):\n    while True:\n        pass\n", "tests_failed"),  # per-case timeouts: a failed case
    ("import os\nos._exit(0)\n", "crashed_run"),
    ("print('SyntaxError in my output')\ndef double(x):\n    return 3 * x\n", "tests_failed"),
    # What a failing call raised is quoted in the report: it must not pick the reason.
    ("def double(x):\n    raise ValueError('did not finish within')\n", "tests_failed"),
    ("def double(x):\n    raise ValueError('\\nImporting m.py failed: SyntaxError')\n", "tests_failed"),
    ("def double(x):\n    raise ValueError('\\nImporting m.py failed')\n", "tests_failed"),
])
def test_code_failures_get_their_own_reason(source, reason):
    require_system("bwrap", "bubblewrap")
    t = episode(CODE_TASK, [call("write_file", path="solution.py", content=source), call("submit")])
    if reason is None:
        assert t.outcome.tier == "success"
    else:
        assert t.outcome.tier == "failed" and t.outcome.fail_reason == reason, t.verdict.detail
