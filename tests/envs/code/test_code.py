"""Code environment: tools, hidden tests, milestones, verify, snapshot/restore, determinism."""

from __future__ import annotations

import ast
import json
import re
import time

import pytest

from tests.conftest import require_system
from trajforge.envs import make_env
from trajforge.envs.code import env as code_env
from trajforge.envs.code.env import MAX_WORKDIR_BYTES, CodeEnv
from trajforge.envs.code.hidden import HiddenTests, TestReport, judge, same_value
from trajforge.envs.sandbox import RunResult, SandboxLimits
from trajforge.schema import Task, ToolCall

GOOD = "def scale(nums):\n    return [x * 3 for x in nums]\n"
WRONG = "def scale(nums):\n    return [x * 2 for x in nums]\n"
SENTINEL = "expected-sentinel-4b1d"


def _task(extra_case: bool = False) -> Task:
    cases = [{"args": [[1, 2]], "expected": [3, 6]}, {"args": [[]], "expected": []},
             {"args": [[-1]], "expected": [-3]}, {"args": [[0, 5]], "expected": [0, 15]}]
    if extra_case:  # a visible case (the last one is held out)
        cases.insert(0, {"args": [["a"]], "expected": [SENTINEL]})
    return Task(id="code-t", env="code", prompt="Write scale(nums) in solution.py", tier="easy",
                split="train", template="scale", reference=(),
                expected={"function": "scale", "cases": cases})


@pytest.fixture
def env():
    require_system("bwrap", "bubblewrap")
    env = make_env("code")
    env.reset(_task())
    yield env
    env.close()


def call(env: CodeEnv, name: str, **arguments):
    return env.execute(ToolCall(name=name, arguments=arguments))


def test_toolset_is_what_the_model_sees():
    toolset = CodeEnv.toolset()
    assert toolset.names == ["write_file", "run_python", "run_tests", "submit"]
    run_python = toolset.get("run_python").parameters
    assert set(run_python["properties"]) == {"code", "path"} and "required" not in run_python
    assert toolset.get("write_file").parameters["required"] == ["path", "content"]
    assert "hidden" in toolset.get("run_tests").description
    assert CodeEnv.final_tool == "submit"


def test_solving_reaches_every_milestone_in_order(env):
    assert call(env, "write_file", path="solution.py", content=GOOD).content == \
        f"Wrote {len(GOOD)} bytes to solution.py."
    assert call(env, "run_tests").content == (
        "3/3 visible tests passed.\nsubmit also runs 1 held-out hidden test (never shown).")
    submitted = call(env, "submit")
    assert submitted.ok and env.done
    assert submitted.content == "Submitted solution.py: 4/4 tests passed (1/1 hidden)."
    verdict = env.verify()
    assert verdict.correct and verdict.submitted and verdict.answer == "4/4 tests passed"
    assert verdict.milestones == ["wrote_file", "ran_code", "tests_passed", "submitted"]


def test_failures_are_shown_without_the_test_source(env):
    call(env, "write_file", path="solution.py", content=WRONG)
    report = call(env, "run_tests").content
    assert report.startswith("1/3 visible tests passed.")
    assert "scale([1, 2]) returned [2, 4], expected [3, 6]" in report
    assert "more failing tests not shown" not in report  # 2 visible failures, both shown
    assert "[0, 5]" not in report and "[0, 15]" not in report  # the held-out case
    assert "def " not in report and "cases" not in report
    call(env, "submit")
    verdict = env.verify()
    assert verdict.submitted and not verdict.correct
    assert verdict.answer == "1/4 tests passed"
    assert verdict.detail.startswith("1/4 tests passed (0/1 hidden).")
    assert "[0, 5]" not in verdict.detail and "[0, 15]" not in verdict.detail
    assert "tests_passed" not in verdict.milestones


def test_expected_values_never_enter_the_sandbox():
    """The runner gets only arguments; code that digs through the runner's globals finds no
    expected values to copy."""
    require_system("bwrap", "bubblewrap")
    env = CodeEnv()
    env.reset(_task(extra_case=True))
    try:
        snoop = ("import sys\nprint(sys.modules['__main__'].__dict__.get('spec'))\n"
                 "print(open('/proc/self/cmdline', 'rb').read())\n" + GOOD)
        call(env, "write_file", path="solution.py", content=snoop)
        report = call(env, "run_tests").content
        assert "'args'" in report  # the snoop did find the spec...
        assert SENTINEL not in report.split("Failures:")[1].split("Your code printed:")[1]
    finally:
        env.close()


def test_printing_a_fake_result_line_does_not_fool_the_tests(env):
    forged = json.dumps({"cases": [{"value": [3, 6]}] * 4})
    call(env, "write_file", path="solution.py",
         content=f"print('@@trajforge-results@@ ' + {forged!r})\n" + WRONG)
    assert call(env, "run_tests").content.startswith("1/3 visible tests passed.")


def test_import_errors_and_missing_functions_are_explained(env):
    call(env, "write_file", path="solution.py", content="def scale(nums) return nums\n")
    report = call(env, "run_tests").content
    assert report.startswith("0/3 visible tests passed.\nsubmit also runs 1 held-out hidden "
                             "test (never shown).\nImporting solution.py failed:")
    assert 'File "/work/solution.py", line 1' in report and "SyntaxError" in report
    assert "importlib" not in report  # the runner's own frames are hidden
    call(env, "write_file", path="solution.py", content="def other():\n    pass\n")
    assert "solution.py defines no function 'scale'" in call(env, "run_tests").content


def test_a_hanging_case_times_out_and_the_rest_are_skipped(env):
    call(env, "write_file", path="solution.py", content="def scale(nums):\n    while True:\n        pass\n")
    result = call(env, "run_tests")
    assert "scale([1, 2]) timed out after 2 s" in result.content
    assert "was skipped after a timeout" in result.content
    assert result.elapsed_s < 6


def test_code_that_exits_the_process_is_reported(env):
    call(env, "write_file", path="solution.py", content="import os\nos._exit(0)\n")
    assert "ended before reporting any result" in call(env, "run_tests").content


def test_run_tests_and_submit_need_the_solution_file(env):
    for tool in ("run_tests", "submit"):
        result = call(env, tool)
        assert not result.ok and "no solution.py in the work directory" in result.content
    assert not env.done
    assert env.verify().detail == "no solution submitted"


def test_run_python_runs_code_or_a_file(env):
    call(env, "write_file", path="solution.py", content=GOOD)
    shown = call(env, "run_python", code="from solution import scale\nprint(scale([2]))\n1/0")
    assert shown.ok
    assert shown.content.startswith("[6]\nTraceback")
    assert shown.content.endswith("ZeroDivisionError: division by zero\n[exit code 1]")
    call(env, "write_file", path="tools/main.py", content="print('from a file')")
    assert call(env, "run_python", path="tools/main.py").content == "from a file\n[exit code 0]"
    assert call(env, "run_python", code="pass").content == "(no output)\n[exit code 0]"
    assert env.milestones == ["wrote_file", "ran_code"]


@pytest.mark.parametrize("name", ["-V", "-c", "-"])
def test_run_python_runs_a_file_whose_name_looks_like_an_option(env, name):
    call(env, "write_file", path=name, content="import sys; print('ran', sys.argv)")
    assert call(env, "run_python", path=name).content == f"ran ['./{name}']\n[exit code 0]"


@pytest.mark.parametrize("arguments, message", [
    ({}, "exactly one of code or path"),
    ({"code": "print(1)", "path": "solution.py"}, "exactly one of code or path"),
    ({"path": "missing.py"}, "no file 'missing.py'"),
    ({"path": "/etc/passwd"}, "absolute"),
])
def test_run_python_argument_errors(env, arguments, message):
    result = call(env, "run_python", **arguments)
    assert not result.ok and message in result.content


@pytest.mark.parametrize("path, message", [
    ("/tmp/x.py", "absolute"), ("../x.py", "leaves the work directory"),
    ("bad name.py", "letters, digits"),
])
def test_write_file_rejects_paths_outside_the_work_dir(env, path, message):
    result = call(env, "write_file", path=path, content="x")
    assert not result.ok and result.error == "bad_path" and message in result.content


def test_write_file_rejects_huge_content(env):
    result = call(env, "write_file", path="big.py", content="x" * 200_000)
    assert not result.ok and result.error == "too_large"


def test_a_run_that_overfills_the_work_dir_is_undone():
    require_system("bwrap", "bubblewrap")
    env = CodeEnv(limits=SandboxLimits(file_mb=16))
    env.reset(_task())
    try:
        call(env, "write_file", path="solution.py", content=GOOD)
        chunk = 15 * 1024 * 1024
        result = call(env, "run_python", code=(
            f"for i in range(3):\n    open(f'blob{{i}}', 'wb').write(b'x' * {chunk})\n"
            "open('solution.py', 'w').write('broken')"))
        assert f"limit {MAX_WORKDIR_BYTES} bytes" in result.content
        assert "its file changes were undone" in result.content
        tree = env.snapshot()["tree"]
        assert set(tree.files) == {"solution.py"} and tree.files["solution.py"] == GOOD.encode()
    finally:
        env.close()


def test_snapshot_and_restore_rewind_files_milestones_and_submission(env):
    call(env, "write_file", path="solution.py", content=WRONG)
    snap = env.snapshot()
    call(env, "write_file", path="solution.py", content=GOOD)
    call(env, "run_python", code="import os; os.makedirs('a/b'); open('a/b/c.txt', 'w').write('x')")
    call(env, "submit")
    assert env.done and env.verify().correct
    env.restore(snap)
    assert not env.done and env.report is None
    assert env.milestones == ["wrote_file"]
    assert env.snapshot()["tree"].files == {"solution.py": WRONG.encode()}
    assert call(env, "run_tests").content.startswith("1/3 visible tests passed.")
    # The snapshot is a copy: restoring it again still works after more changes.
    call(env, "write_file", path="solution.py", content=GOOD)
    env.restore(snap)
    assert env.snapshot()["tree"].files == {"solution.py": WRONG.encode()}


def test_same_task_same_actions_same_outputs():
    require_system("bwrap", "bubblewrap")
    script = [("write_file", {"path": "solution.py", "content": "import random\n" + WRONG}),
              ("run_python", {"code": "print({'b', 'a', 'c'}, hash('x'))"}),
              ("run_tests", {}), ("submit", {})]
    outputs = []
    for _ in range(2):
        env = CodeEnv()
        env.reset(_task())
        outputs.append([call(env, name, **args).content for name, args in script])
        env.close()
    assert outputs[0] == outputs[1]


def test_each_episode_gets_a_fresh_work_dir_removed_on_close(env):
    first = env._workdir
    call(env, "write_file", path="solution.py", content=GOOD)
    env.reset(_task())
    assert env._workdir != first and not first.exists()
    assert env.snapshot()["tree"].files == {}
    last = env._workdir
    env.close()
    assert not last.exists()


def test_a_task_without_hidden_tests_is_refused_clearly():
    bad = _task().model_copy(update={"expected": "42"})
    with pytest.raises(ValueError, match="code-t: expected must describe hidden tests"):
        CodeEnv().reset(bad)


def test_judge_reads_only_the_runner_report():
    tests = HiddenTests.model_validate(_task().expected)
    limits = SandboxLimits()
    garbage = RunResult(returncode=0, stdout="no report here", stderr="")
    report = judge(tests, garbage, limits)
    assert report.passed == 0 and "ended before reporting" in report.error
    timed_out = RunResult(returncode=None, stdout="", stderr="", timed_out=True)
    assert "did not finish within 10 s" in judge(tests, timed_out, limits).error
    assert not TestReport(total=0).all_passed


@pytest.mark.parametrize("got, expected, same", [
    (1, 1, True), (1.0000001, 1, True), (True, 1, False), (1, True, False), (0.1 + 0.2, 0.3, True),
    ([1, [2]], [1, [2]], True), ([1], [1, 2], False), ({"a": 1}, {"a": 1.0}, True),
    ("1", 1, False), (None, None, True), ({"a": 1}, {"b": 1}, False),
    (10 ** 400, 1.5, False), (1.5, 10 ** 400, False), ([10 ** 400], [2.0], False),
])
def test_same_value(got, expected, same):
    assert same_value(got, expected) is same


def test_a_returned_int_past_float_range_fails_its_case_instead_of_crashing_the_judge():
    """``math.isclose(10**400, 1.5)`` raises OverflowError: the judge (and with it ``submit``)
    crashed, so the wrong solution was never graded as submitted."""
    tests = HiddenTests(function="f", cases=[{"args": [1], "expected": 1.5},
                                             {"args": [2], "expected": 2.5}])
    line = "@@trajforge-results@@ " + json.dumps({"cases": [{"value": 10 ** 400}, {"value": 2.5}]})
    report = judge(tests, RunResult(returncode=0, stdout=line + "\n", stderr=""), SandboxLimits())
    assert (report.passed, report.total) == (1, 2) and not report.all_passed
    assert report.failures[0].startswith("f(1) returned 1000")


def test_submitting_a_huge_int_is_a_graded_failure(env):
    task = _task().model_copy(update={"expected": {"function": "scale", "cases": [
        {"args": [[1]], "expected": 1.5}, {"args": [[2]], "expected": 2.5}]}})
    env.reset(task)
    call(env, "write_file", path="solution.py", content="def scale(nums):\n    return 10 ** 4000\n")
    result = call(env, "submit")
    assert result.ok and env.done and result.content.endswith("0/2 tests passed.")
    assert env.verify().submitted and not env.verify().correct


TWO_CASES = [{"args": [1], "expected": 2}, {"args": [2], "expected": 4}]


@pytest.mark.parametrize("change, message", [
    ({"module": "solution.py"}, "plain module name"),
    ({"module": "pkg/solution"}, "plain module name"),
    ({"module": ""}, "plain module name"),
    ({"module": "os"}, "standard-library module"),
    ({"module": "json"}, "standard-library module"),
    ({"function": "double(x)"}, "identifier"),
    ({"case_timeout_s": 0}, "greater than 0"),
    ({"case_timeout_s": -1}, "greater than 0"),
    ({"case_timeout_s": 1e300}, "less than or equal"),
])
def test_hidden_tests_the_runner_cannot_run_as_meant_are_refused(change, message):
    """A stdlib module name made the runner test the stdlib (``os.getcwd`` passed whatever the
    model wrote in os.py); ``solution.py`` or a timeout of 0 or less made every case fail."""
    tests = {"function": "double", "cases": TWO_CASES, **change}
    with pytest.raises(ValueError, match=message):
        CodeEnv.check_expected(tests)
    bad = _task().model_copy(update={"expected": tests})
    with pytest.raises(ValueError, match="expected must describe hidden tests"):
        CodeEnv().reset(bad)


@pytest.mark.parametrize("values", [[1, 1.0, 1], [0.3, 0.1 + 0.2], [{"a": [1]}, {"a": [1.0]}]])
def test_tests_a_constant_function_passes_are_weak(values):
    cases = [{"args": [i], "expected": v} for i, v in enumerate(values)]
    with pytest.raises(ValueError, match="constant function"):
        CodeEnv.check_expected({"function": "f", "cases": cases})


def test_one_reply_of_endless_runs_cannot_stall_the_episode(monkeypatch):
    """Thousands of ``while True: pass`` calls fit in one reply; each ran to the deadline, so a
    turn could take hours (or end as an episode_timeout env_fault). The episode's run time is
    budgeted; past it run_python and run_tests refuse, and submit still grades."""
    require_system("bwrap", "bubblewrap")
    monkeypatch.setattr(code_env, "RUN_BUDGET_RUNS", 2, raising=False)
    env = CodeEnv(limits=SandboxLimits(wall_s=0.5))
    env.reset(_task())
    try:
        start = time.monotonic()
        results = [call(env, "run_python", code="while True:\n    pass") for _ in range(40)]
        assert time.monotonic() - start < 15
        refused = [r for r in results if r.error == "run_budget"]
        assert len(refused) >= 36 and not any(r.fault for r in results)
        assert "only submit still runs the tests" in refused[0].content
        assert call(env, "run_tests").error == "run_budget"
        call(env, "write_file", path="solution.py", content=GOOD)
        submitted = call(env, "submit")
        assert submitted.ok and env.verify().correct
        env.reset(_task())  # a new episode starts with the whole budget
        assert call(env, "run_python", code="print(1)").ok
    finally:
        env.close()


SQUARES = {"function": "sq", "cases": [{"args": [x], "expected": x * x + 7}
                                       for x in (3, -2, 11, 0, 5, 9, -8)]}


def _lookup_source(table: dict[str, object]) -> str:
    return (f"TABLE = {table!r}\n"
            "def sq(*args):\n    return TABLE.get(repr(args))\n")


def test_a_lookup_table_of_the_values_run_tests_shows_fails_submit():
    """run_tests showed "f(args) returned X, expected Y" for the first failures of the very cases
    submit grades, so a policy could learn every expected value over a few runs, hard-code them and
    pass submit without solving anything. Submit now also grades held-out cases whose arguments
    and expected values no tool result ever shows."""
    require_system("bwrap", "bubblewrap")
    env = CodeEnv()
    env.reset(Task(id="code-sq", env="code", prompt="Write sq(x)", tier="easy", split="train",
                   template="sq", reference=(), expected=SQUARES))
    try:
        table: dict[str, object] = {}
        shown = []
        for _ in range(5):
            call(env, "write_file", path="solution.py", content=_lookup_source(table))
            report = call(env, "run_tests").content
            shown.append(report)
            failing = re.findall(r"^- sq\((.*)\) returned .*, expected (.*)$", report, re.M)
            if not failing:
                break
            for args, expected in failing:
                table[repr(ast.literal_eval(f"({args},)"))] = ast.literal_eval(expected)
        submitted = call(env, "submit")
        shown.append(submitted.content)
        verdict = env.verify()
        assert verdict.submitted and not verdict.correct
        assert shown[-2].startswith("5/5 visible tests passed.")
        assert "submit also runs 2 held-out hidden tests (never shown)" in shown[-2]
        assert submitted.content == "Submitted solution.py: 5/7 tests passed (0/2 hidden)."
        # The held-out cases (the last two) appear in no tool result nor in the verdict.
        for text in shown + [verdict.detail]:
            assert "sq(9)" not in text and "sq(-8)" not in text
            assert "88" not in text and "71" not in text
    finally:
        env.close()


@pytest.mark.parametrize("n, held_out", [(1, 0), (2, 0), (3, 1), (4, 1), (6, 2), (8, 2), (9, 3), (12, 4)])
def test_the_last_third_of_the_cases_are_held_out_and_two_stay_visible(n, held_out):
    tests = HiddenTests(function="f", cases=[{"args": [i], "expected": i} for i in range(n)])
    assert tests.held_out == held_out and len(tests.visible) == n - held_out
    assert tests.visible == tests.cases[:n - held_out] and len(tests.visible) >= min(n, 2)
    # A stored task is only {module, function, cases}: the split needs no new field.
    assert set(tests.model_dump()) == {"module", "function", "cases", "case_timeout_s"}


def test_the_judge_lists_only_visible_failures_and_counts_held_out_ones():
    tests = HiddenTests(function="f", cases=[{"args": [i], "expected": i * 10} for i in range(9)])
    wrong = [{"value": -1}] * 9
    line = "@@trajforge-results@@ " + json.dumps({"cases": wrong}) + "\n"
    every = judge(tests, RunResult(returncode=0, stdout=line, stderr=""), SandboxLimits(),
                  held_out=True)
    assert (every.passed, every.total, every.held_out) == (0, 9, 3)
    text = every.render()
    assert text.startswith("0/9 tests passed (0/3 hidden).")
    assert "(3 more failing tests not shown)" in text  # of the 6 visible; held-out ones aren't
    assert not any(f"f({i})" in text or f"{i * 10}" in text for i in (6, 7, 8))
    visible = judge(tests, RunResult(returncode=0, stdout=line, stderr=""), SandboxLimits())
    assert (visible.total, visible.not_run) == (6, 3) and not visible.all_passed
    assert visible.render().startswith("0/6 visible tests passed.\nsubmit also runs 3 held-out")
