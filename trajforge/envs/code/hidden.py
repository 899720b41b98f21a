"""A code task's hidden tests: the cases, the runner that calls the model's function in the
sandbox, and the judge that compares what it returned on the host.

``HiddenTests`` (stored as ``Task.expected``) holds the module and function name and a list of
cases, each arguments + expected return value. As in code benchmarks, some cases are *visible*
(``run_tests`` runs them and shows failing ones) and the last few are *held out*
(``held_out_count``): only ``submit`` runs them, and no report ever shows their arguments or
expected values. Were every graded case shown, a policy could read the expected values off a few
``run_tests`` failures, return them from a lookup table and pass ``submit`` without solving
anything. Only the *arguments* enter the sandbox; the runner
there imports the model's module, calls the function on each case (with a per-case timer) and
reports the return values as JSON on stdout, while anything the model's code prints is diverted
to stderr. The host compares those values with the expected ones (``judge``), so code that tampers
with the runner can at worst report values — which must still be the right ones.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from trajforge.envs.judge import Unreadable, read_report
from trajforge.envs.sandbox import RunResult, SandboxLimits

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


def held_out_count(n: int) -> int:
    """How many of ``n`` cases are held out (the last ones): a third, at least one once there are
    3 cases, so at least 2 stay visible; none of 1 or 2 (too few to hold any back)."""
    return max(1, n // 3) if n >= 3 else 0


class HiddenTests(BaseModel):
    """What a code task stores in ``Task.expected``."""

    model_config = ConfigDict(frozen=True)

    module: str = "solution"
    """The module the model writes (``solution`` -> ``solution.py``)."""
    function: str
    """The function under test."""
    cases: list[TestCase] = Field(min_length=1)
    """The hidden unit tests."""
    case_timeout_s: float = Field(2.0, gt=0, le=600)
    """Time one case may take before it counts as failed (the runner's timer refuses 0 or less,
    and takes 0 to mean no timer at all)."""

    @field_validator("module")
    @classmethod
    def _plain_module(cls, name: str) -> str:
        # The runner imports it by name: ``solution.py`` or ``a/b`` can never be imported, and a
        # standard-library name (``os``, ``json``) is the already-loaded stdlib module, so the
        # tests would run against it instead of the model's file and pass whatever it wrote.
        if not name.isidentifier():
            raise ValueError(f"module must be a plain module name such as 'solution' (no '.py', "
                             f"no '/'), not {name[:80]!r}")
        if name in sys.stdlib_module_names:
            raise ValueError(f"module {name!r} is a standard-library module, which the tests "
                             "would import instead of the model's file; use e.g. 'solution'")
        return name

    @field_validator("function")
    @classmethod
    def _plain_function(cls, name: str) -> str:
        if not name.isidentifier():
            raise ValueError(f"function must be a Python identifier, not {name[:80]!r}")
        return name

    @property
    def path(self) -> str:
        return f"{self.module}.py"

    @property
    def held_out(self) -> int:
        """How many of the last cases only ``submit`` runs (derived from the case count, so tasks
        stored before the split grade the same way)."""
        return held_out_count(len(self.cases))

    @property
    def visible(self) -> list[TestCase]:
        """The cases ``run_tests`` runs and shows."""
        return self.cases[:len(self.cases) - self.held_out]


class TestReport(BaseModel):
    """The outcome of one run of the hidden tests."""

    __test__ = False

    passed: int = 0
    total: int = 0
    failures: list[str] = Field(default_factory=list)
    """The first SHOWN_FAILURES failing visible cases, as the model reads them."""
    held_out: int = 0
    """Held-out cases among ``total`` (a submit run): counted, never shown."""
    held_out_passed: int = 0
    not_run: int = 0
    """Held-out cases this run left for ``submit`` (a ``run_tests`` run)."""
    error: str = ""
    """Why no case could run (import failed, timeout...), when that happened."""
    output: str = ""
    """What the model's code printed during the run (capped)."""

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total and not self.error

    def summary(self) -> str:
        """``5/7 tests passed (1/2 hidden)`` (a submit run), ``3/3 visible tests passed`` (a
        run_tests run that left hidden tests for submit) or ``4/4 tests passed``."""
        if self.held_out:
            return (f"{self.passed}/{self.total} tests passed "
                    f"({self.held_out_passed}/{self.held_out} hidden)")
        return f"{self.passed}/{self.total} {'visible ' if self.not_run else ''}tests passed"

    def render(self) -> str:
        lines = [self.summary() + "."]
        if self.not_run:
            lines.append(f"submit also runs {self.not_run} held-out hidden "
                         f"test{'s' if self.not_run != 1 else ''} (never shown).")
        if self.error:
            lines.append(self.error)
        if self.failures:
            lines.append("Failures:")
            lines += [f"- {f}" for f in self.failures]
            failed_hidden = self.held_out - self.held_out_passed
            more = self.total - self.passed - failed_hidden - len(self.failures)
            if more > 0:
                lines.append(f"({more} more failing tests not shown)")
        if self.output.strip():
            lines.append("Your code printed:\n" + self.output.rstrip())
        return "\n".join(lines)


def judge(tests: HiddenTests, result: RunResult, limits: SandboxLimits,
          note: str = "", held_out: bool = False) -> TestReport:
    """Compare the runner's reported values with the expected ones: of the visible cases, or of
    every case (``held_out``: the run was given all their arguments, as ``submit`` gives). Only
    visible cases are ever shown; held-out ones are only counted."""
    output = _cap(result.stderr, limits.output_bytes) + note
    cases = tests.cases if held_out else tests.visible
    shown = len(tests.visible)
    counts = {"total": len(cases), "held_out": len(cases) - shown,
              "not_run": len(tests.cases) - len(cases)}
    reported = read_report(result.stdout, _RESULT_MARK)  # bounded: the line came from the sandbox
    if reported is None:
        if result.timed_out:
            error = (f"The tests did not finish within {limits.wall_s:g} s "
                     "(an infinite loop or a very slow function?).")
        else:
            error = ("The test run ended before reporting any result "
                     f"{result.describe(limits)} (did the code exit the process?).")
        return TestReport(**counts, error=error, output=output)
    if isinstance(reported, Unreadable):  # counts against the solution, never as a fault
        return TestReport(**counts, output=output, error=(
            f"The test results could not be read ({reported.reason}), so no test counts as "
            "passed. Don't write to the test runner's output."))
    if reported.error:
        return TestReport(**counts, error=reported.error, output=output)
    outcomes = reported.cases
    passed, held_out_passed, failures = 0, 0, []
    for i, case in enumerate(cases):
        got = outcomes[i] if i < len(outcomes) else {}
        call = f"{tests.function}({_show_args(case.args)})"
        if "value" in got and same_value(got["value"], case.expected):
            passed += 1
            held_out_passed += i >= shown
        elif i < shown and len(failures) < SHOWN_FAILURES:
            if "value" in got:
                failures.append(f"{call} returned {_show(got['value'])}, "
                                f"expected {_show(case.expected)}")
            else:
                failures.append(f"{call} {got.get('error', 'did not run')}")
    return TestReport(**counts, passed=passed, held_out_passed=held_out_passed,
                      failures=failures, output=output)


def same_value(got: Any, expected: Any) -> bool:
    """Equality of JSON values as a unit test means it: floats within 1e-6, bools only as bools."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        if isinstance(expected, float) or isinstance(got, float):
            try:
                return math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-6)
            except OverflowError:  # an int past float's range (10**400) is no float's equal
                return False
        return got == expected
    if isinstance(expected, list) and isinstance(got, list):
        return len(got) == len(expected) and all(map(same_value, got, expected))
    if isinstance(expected, dict) and isinstance(got, dict):
        return got.keys() == expected.keys() and all(same_value(got[k], expected[k])
                                                     for k in expected)
    return type(got) is type(expected) and got == expected


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
