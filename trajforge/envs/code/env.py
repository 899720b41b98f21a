"""Code environment: write a Python function in a sandboxed work directory until hidden tests pass.

Tools: ``write_file`` (host-side, symlink-safe), ``run_python`` (code or a file, in the sandbox),
``run_tests`` (the task's hidden unit tests against the model's module: counts and the first
failures, never the test source) and ``submit`` (runs the hidden tests one last time and ends the
episode). Milestones, in order: wrote_file, ran_code, tests_passed, submitted. ``verify``: correct
iff every hidden test passed on the submitted code.

A task's hidden tests live in ``Task.expected`` (see ``HiddenTests``): the module and function
name and a list of cases, each arguments + expected return value. Only the *arguments* enter the
sandbox; a runner there imports the model's module, calls the function on each case (with a
per-case timer) and reports the return values as JSON on stdout, while anything the model's code
prints is diverted to stderr. The host compares those values with the expected ones, so code that
tampers with the runner can at worst report values — which must still be the right ones.

Each instance owns a fresh work directory (``close()`` removes it) and a ``Sandbox``
(``sandbox.py``); building the sandbox in ``reset`` runs the once-per-process self-test, so a
machine without bubblewrap fails before the first episode with a message saying how to fix it.
"""

from __future__ import annotations

import errno
import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trajforge.envs import workdir
from trajforge.envs.base import Environment, ToolError, Verdict
from trajforge.envs.sandbox import RunResult, Sandbox, SandboxLimits
from trajforge.schema import Task

MAX_FILE_BYTES = 100_000
"""Largest file ``write_file`` accepts (and largest ``run_python`` code)."""
MAX_WORKDIR_BYTES = 32 * 1024 * 1024
MAX_WORKDIR_ENTRIES = 2000
"""After each run the work directory must stay within these, or the run's changes are undone."""
SHOWN_FAILURES = 3
"""Failing cases shown in a test report; the rest are only counted."""
_RESULT_MARK = "@@trajforge-results@@ "


class TestCase(BaseModel):
    """One hidden unit test: call the function with ``args`` and expect ``expected``."""

    model_config = ConfigDict(frozen=True)
    __test__ = False  # not a pytest class

    args: list[Any]
    """Positional arguments (JSON values)."""
    expected: Any
    """The return value a correct function gives (a JSON value)."""


class HiddenTests(BaseModel):
    """What a code task stores in ``Task.expected``."""

    model_config = ConfigDict(frozen=True)

    module: str = "solution"
    """The module the model writes (``solution`` -> ``solution.py``)."""
    function: str
    """The function under test."""
    cases: list[TestCase] = Field(min_length=1)
    """The hidden unit tests."""
    case_timeout_s: float = 2.0
    """Time one case may take before it counts as failed."""

    @property
    def path(self) -> str:
        return f"{self.module}.py"


class TestReport(BaseModel):
    """The outcome of one run of the hidden tests."""

    __test__ = False

    passed: int = 0
    total: int = 0
    failures: list[str] = Field(default_factory=list)
    """The first SHOWN_FAILURES failing cases, as the model reads them."""
    error: str = ""
    """Why no case could run (import failed, timeout...), when that happened."""
    output: str = ""
    """What the model's code printed during the run (capped)."""

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total and not self.error

    def render(self) -> str:
        lines = [f"{self.passed}/{self.total} tests passed."]
        if self.error:
            lines.append(self.error)
        if self.failures:
            lines.append("Failures:")
            lines += [f"- {f}" for f in self.failures]
            hidden = self.total - self.passed - len(self.failures)
            if hidden > 0:
                lines.append(f"({hidden} more failing tests not shown)")
        if self.output.strip():
            lines.append("Your code printed:\n" + self.output.rstrip())
        return "\n".join(lines)


class CodeEnv(Environment):
    """Write a Python function in a sandbox until its hidden unit tests pass."""

    name = "code"
    tool_names = ("write_file", "run_python", "run_tests", "submit")
    final_tool = "submit"
    instructions = (
        "You are a Python programmer working in a sandboxed directory (no network; each run is "
        "limited to a few seconds). Write the requested function to the file the task names "
        "with write_file, check it with run_tests (hidden unit tests) or run_python, fix it "
        "until all tests pass, then call submit."
    )

    def __init__(self, seed: int = 0, limits: SandboxLimits | None = None,
                 allow_unsandboxed: bool | None = None):
        super().__init__(seed=seed)
        self.limits = limits or SandboxLimits()
        self.allow_unsandboxed = allow_unsandboxed
        self.tests: HiddenTests | None = None
        self.report: TestReport | None = None
        """The report ``submit`` produced (the submitted code's result)."""
        self._workdir: Path | None = None
        self._sandbox: Sandbox | None = None

    # ---- episode lifecycle ------------------------------------------------------------------

    def reset(self, task: Task) -> str:
        """Parse the task's hidden tests and start from an empty work directory."""
        try:
            tests = HiddenTests.model_validate(task.expected)
        except ValueError as e:
            raise ValueError(f"task {task.id}: expected must describe hidden tests "
                             f"(module, function, cases): {e}") from None
        super().reset(task)
        self.close()
        self.tests = tests
        self.report = None
        self._workdir = workdir.make_workdir()
        self._sandbox = Sandbox(self._workdir, self.limits, self.allow_unsandboxed)
        return ""

    def close(self) -> None:
        if self._workdir is not None:
            workdir.remove_workdir(self._workdir)
            self._workdir = None
            self._sandbox = None

    def snapshot(self) -> dict[str, Any]:
        """Episode state: milestones, done, the submitted report and every work-dir file."""
        snap = super().snapshot()
        snap["report"] = self.report.model_copy(deep=True) if self.report else None
        snap["tree"] = workdir.read_tree(self._require_dir())
        return snap

    def restore(self, snap: dict[str, Any]) -> None:
        state = dict(snap)
        tree = state.pop("tree")
        report = state.pop("report")
        super().restore(state)
        self.report = report.model_copy(deep=True) if report else None
        workdir.replace_tree(self._require_dir(), tree)

    # ---- synthesis hooks: the writer supplies the hidden tests, the reference must pass them ----

    expected_from_writer = True

    @classmethod
    def check_expected(cls, value: Any) -> Any:
        try:
            tests = HiddenTests.model_validate(value)
        except ValidationError as e:
            raise ValueError(f"hidden tests must be {{module, function, cases: [{{args, expected}}]}}: "
                             f"{e.errors()[0]['loc']}: {e.errors()[0]['msg']}") from None
        if len({json.dumps(c.expected, sort_keys=True) for c in tests.cases}) < 2:
            raise ValueError("every hidden test expects the same value, so a constant function "
                             "would pass them")
        return tests.model_dump()

    def expected_outcome(self) -> Any:
        """The hidden tests themselves, once the executed reference solution passed all of them."""
        verdict = self.verify()
        if not verdict.submitted:
            raise ToolError("the plan never submitted a solution", kind="no_final_call")
        if not verdict.correct:
            raise ToolError(f"the plan's own solution fails its tests: {verdict.detail}",
                            kind="verify_failed")
        return self.task.expected

    def describe_for_synthesis(self) -> str:
        return (super().describe_for_synthesis() + " For this environment `expected` is REQUIRED: the "
                "hidden unit tests, as {\"module\": \"solution\", \"function\": NAME, \"cases\": "
                "[{\"args\": [...], \"expected\": VALUE}, ...]} with at least 4 cases whose expected "
                "values differ. The plan writes the reference solution to solution.py, runs the tests "
                "and submits; the task is kept only if that solution passes every case.")

    def verify(self) -> Verdict:
        report = self.report
        if report is None:
            return Verdict(milestones=list(self.milestones), detail="no solution submitted")
        return Verdict(submitted=True, answer=f"{report.passed}/{report.total} tests passed",
                       correct=report.all_passed, milestones=list(self.milestones),
                       detail=report.render())

    # ---- tools ------------------------------------------------------------------------------

    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a file in your work directory.

        Args:
            path: File path relative to the work directory, e.g. solution.py.
            content: The complete file content.
        """
        root = self._require_dir()
        data = content.encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise ToolError(f"the file is {len(data)} bytes; the limit is {MAX_FILE_BYTES}",
                            kind="too_large")
        try:
            rel = workdir.check_relpath(path)
            workdir.write_file(root, rel, data)
        except ValueError as e:
            raise ToolError(str(e), kind="bad_path") from None
        except OSError as e:
            # A directory, a file where a directory should be, or a symlink on the way.
            why = ("it is a symbolic link, or the path goes through one" if e.errno == errno.ELOOP
                   else e.strerror or str(e))
            raise ToolError(f"cannot write {path!r}: {why}", kind="bad_path") from None
        self.reach("wrote_file")
        return f"Wrote {len(data)} bytes to {rel}."

    def run_python(self, code: str = "", path: str = "") -> str:
        """Run Python code, or a .py file from your work directory, and show its output.

        Args:
            code: Python source to run. Give this or path, not both.
            path: A .py file in the work directory to run instead, e.g. solution.py.
        """
        self._require_dir()
        if bool(code.strip()) == bool(path.strip()):
            raise ToolError("give exactly one of code or path", kind="bad_arguments")
        if code.strip():
            if len(code.encode("utf-8")) > MAX_FILE_BYTES:
                raise ToolError(f"the code is longer than {MAX_FILE_BYTES} bytes; write it to a "
                                "file and run the file", kind="too_large")
            argv = ["-c", code]
        else:
            try:
                rel = workdir.check_relpath(path)
            except ValueError as e:
                raise ToolError(str(e), kind="bad_path") from None
            if not (self._require_dir() / rel).is_file():
                raise ToolError(f"no file {rel!r} in the work directory; write it first",
                                kind="not_found")
            argv = [rel]
        result, note = self._run(argv)
        self.reach("ran_code")
        parts = [text.rstrip("\n") for text in (result.stdout, result.stderr) if text.strip()]
        parts.append(result.describe(self.limits) + note)
        return "\n".join(parts) if len(parts) > 1 else "(no output)\n" + parts[0]

    def run_tests(self) -> str:
        """Run the hidden unit tests on your solution and show how many pass."""
        report = self._test()
        if report.all_passed:
            self.reach("tests_passed")
        return report.render()

    def submit(self) -> str:
        """Submit your solution: the hidden tests run one last time and the episode ends."""
        report = self._test()
        if report.all_passed:
            self.reach("tests_passed")
        self.report = report
        self.reach("submitted")
        return f"Submitted {self._tests().path}: {report.passed}/{report.total} tests passed."

    # ---- helpers ----------------------------------------------------------------------------

    def _require_dir(self) -> Path:
        if self._workdir is None:
            raise RuntimeError("CodeEnv used before reset(task)")  # caller bug -> env_fault
        return self._workdir

    def _tests(self) -> HiddenTests:
        if self.tests is None:
            raise RuntimeError("CodeEnv used before reset(task)")
        return self.tests

    def _run(self, argv: list[str], stdin: bytes = b"",
             output_bytes: int | None = None) -> tuple[RunResult, str]:
        """Run python in the sandbox; undo the run's file changes if it overfilled the dir."""
        root = self._require_dir()
        before = workdir.read_tree(root)
        assert self._sandbox is not None
        result = self._sandbox.run([self._sandbox.python, *argv], stdin=stdin,
                                   output_bytes=output_bytes)
        size, entries = workdir.usage(root)
        if size <= MAX_WORKDIR_BYTES and entries <= MAX_WORKDIR_ENTRIES:
            return result, ""
        workdir.replace_tree(root, before)
        return result, (f"\n[the program left {size} bytes in {entries} files in the work "
                        f"directory (limit {MAX_WORKDIR_BYTES} bytes, {MAX_WORKDIR_ENTRIES} "
                        "files); its file changes were undone]")

    def _test(self) -> TestReport:
        """Run the hidden tests against the work directory's module."""
        tests = self._tests()
        if not (self._require_dir() / tests.path).is_file():
            raise ToolError(f"no {tests.path} in the work directory; write your solution there "
                            "with write_file first", kind="not_found")
        spec = {"module": tests.module, "function": tests.function,
                "timeout": tests.case_timeout_s, "args": [c.args for c in tests.cases]}
        # Results are small (values are capped in the runner); the printed output is not.
        result, note = self._run(["-c", RUNNER], stdin=json.dumps(spec).encode(),
                                 output_bytes=max(self.limits.output_bytes, 256_000))
        self.reach("ran_code")
        return judge(tests, result, self.limits, note)


def judge(tests: HiddenTests, result: RunResult, limits: SandboxLimits,
          note: str = "") -> TestReport:
    """Compare the runner's reported values with the expected ones."""
    output = _cap(result.stderr, limits.output_bytes) + note
    total = len(tests.cases)
    reported = _read_results(result.stdout)
    if reported is None:
        if result.timed_out:
            error = (f"The tests did not finish within {limits.wall_s:g} s "
                     "(an infinite loop or a very slow function?).")
        else:
            error = ("The test run ended before reporting any result "
                     f"{result.describe(limits)} (did the code exit the process?).")
        return TestReport(total=total, error=error, output=output)
    if reported.get("error"):
        return TestReport(total=total, error=reported["error"], output=output)
    outcomes = reported.get("cases", [])
    passed, failures = 0, []
    for i, case in enumerate(tests.cases):
        got = outcomes[i] if i < len(outcomes) and isinstance(outcomes[i], dict) else {}
        call = f"{tests.function}({_show_args(case.args)})"
        if "value" in got and same_value(got["value"], case.expected):
            passed += 1
        elif len(failures) < SHOWN_FAILURES:
            if "value" in got:
                failures.append(f"{call} returned {_show(got['value'])}, "
                                f"expected {_show(case.expected)}")
            else:
                failures.append(f"{call} {got.get('error', 'did not run')}")
    return TestReport(passed=passed, total=total, failures=failures, output=output)


def same_value(got: Any, expected: Any) -> bool:
    """Equality of JSON values as a unit test means it: floats within 1e-6, bools only as bools."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        if isinstance(expected, float) or isinstance(got, float):
            return math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-6)
        return got == expected
    if isinstance(expected, list) and isinstance(got, list):
        return len(got) == len(expected) and all(map(same_value, got, expected))
    if isinstance(expected, dict) and isinstance(got, dict):
        return got.keys() == expected.keys() and all(same_value(got[k], expected[k])
                                                     for k in expected)
    return type(got) is type(expected) and got == expected


def _read_results(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(_RESULT_MARK):
            try:
                data = json.loads(line[len(_RESULT_MARK):])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _show(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _show_args(args: list[Any]) -> str:
    return _show(tuple(args))[1:-1].rstrip(",") if args else ""


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


# Runs inside the sandbox. It reads the case arguments from stdin before importing the model's
# module, diverts fd 1 to stderr so prints can't mix with the results, and reports one JSON line.
RUNNER = r"""
import copy, importlib, json, os, signal, sys, traceback
spec = json.loads(sys.stdin.read())
results = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr
sys.path.insert(0, os.getcwd())
MARK = "@@trajforge-results@@ "

class CaseTimeout(BaseException):
    pass

def alarm(signum, frame):
    raise CaseTimeout()

def short(text, n=300):
    return text if len(text) <= n else text[:n] + "..."

def report(data):
    results.write("\n" + MARK + json.dumps(data) + "\n")
    results.flush()

signal.signal(signal.SIGALRM, alarm)
try:
    module = importlib.import_module(spec["module"])
except BaseException:
    # Show the traceback from the model's own file on: the runner's frames are noise to it.
    lines = traceback.format_exc().strip().splitlines()
    mine = '"%s/' % os.getcwd()
    start = next((i for i, l in enumerate(lines) if mine in l), len(lines) - 1)
    shown = "\n".join(lines[start:][-10:])
    report({"error": "Importing %s.py failed:\n%s" % (spec["module"], shown)})
    sys.exit(0)
fn = getattr(module, spec["function"], None)
if not callable(fn):
    report({"error": "%s.py defines no function %r." % (spec["module"], spec["function"])})
    sys.exit(0)
cases = []
for args in spec["args"]:
    try:
        signal.setitimer(signal.ITIMER_REAL, spec["timeout"])
        try:
            value = fn(*copy.deepcopy(args))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except CaseTimeout:
        # One hung case would otherwise cost a timeout per remaining case.
        why = "timed out after %g s (the remaining tests were skipped)" % spec["timeout"]
        cases.append({"error": why})
        cases += [{"error": "was skipped after a timeout"}] * (len(spec["args"]) - len(cases))
        break
    except BaseException as e:
        cases.append({"error": "raised " + short("%s: %s" % (type(e).__name__, e))})
        continue
    try:
        size = len(json.dumps(value))
    except BaseException:
        kind = type(value).__name__
        cases.append({"error": "returned a %s, which the tests cannot compare" % kind})
        continue
    if size > 20000:
        cases.append({"error": "returned a value too large to compare (%d characters)" % size})
    else:
        cases.append({"value": value})
report({"cases": cases})
"""
