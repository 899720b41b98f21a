"""Code environment: write a Python function in a sandboxed work directory until hidden tests pass.

Tools: ``write_file`` (host-side, symlink-safe), ``run_python`` (code or a file, in the sandbox),
``run_tests`` (the task's *visible* unit tests against the model's module: counts and the first
failures, never the test source) and ``submit`` (runs every test, the held-out ones too, and ends
the episode). Milestones, in order: wrote_file, ran_code, tests_passed (every test the run ran
passed), submitted. ``verify``: correct iff every test, held-out ones included, passed on the
submitted code. ``run_python`` and ``run_tests`` share a
per-episode run-time budget (``RUN_BUDGET_RUNS``); ``submit`` always runs.

A task's hidden tests live in ``Task.expected`` (``hidden.py``: cases, which of them are held
out, the in-sandbox runner and the host-side judge); only their *arguments* ever enter the
sandbox, and a held-out case's only when the episode ends.

Each instance owns a fresh work directory (``close()`` removes it) and a ``Sandbox``
(``sandbox.py``); building the sandbox in ``reset`` runs the once-per-process self-test, so a
machine without bubblewrap fails before the first episode with a message saying how to fix it.
"""

from __future__ import annotations

import errno
import json
import subprocess
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trajforge.envs import workdir
from trajforge.envs.base import Environment, InfraError, ToolError, Verdict
from trajforge.envs.code.hidden import RUNNER, HiddenTests, TestReport, judge, same_value
from trajforge.envs.sandbox import RunResult, Sandbox, SandboxLimits
from trajforge.parse.limits import clean_text, clip, short
from trajforge.schema import Task

MAX_FILE_BYTES = 100_000
"""Largest file ``write_file`` accepts (and largest ``run_python`` code)."""
_HOST_TROUBLE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EMFILE,
                           errno.ENFILE, errno.ENOMEM})
"""OSErrors of a host-side write that say the machine is in trouble (disk full, out of file
descriptors), not that the model's path was wrong."""
MAX_WORKDIR_BYTES = 32 * 1024 * 1024
MAX_WORKDIR_ENTRIES = 2000
"""After each run the work directory must stay within these, or the run's changes are undone."""
RUN_BUDGET_RUNS = 12
"""An episode's ``run_python`` and ``run_tests`` calls together may use this many full runs of
the sandbox deadline (``12 * wall_s``: 2 minutes by default); past it they refuse and only
``submit`` still runs the tests. One reply can hold thousands of calls, each of which may run to
the deadline: without a budget a single turn would stall a collection for hours, or end as an
``episode_timeout`` — an env_fault, retried and left out of the metrics."""


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
        self._run_s = 0.0
        """Sandbox seconds this episode has used; not part of a snapshot (time spent stays spent)."""

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
        self._run_s = 0.0
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
        # Compared as the judge compares (1 and 1.0 are the same answer), not as JSON text.
        first = tests.cases[0].expected
        if all(same_value(c.expected, first) for c in tests.cases):
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
                "values differ. The last third of the cases are held out (only submit runs them, "
                "and nothing shows them), so list edge cases first. The plan writes the reference solution to solution.py, runs the tests "
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
        data = _source_bytes(content, "the content", nul_ok=True)
        if len(data) > MAX_FILE_BYTES:
            raise ToolError(f"the file is {len(data)} bytes; the limit is {MAX_FILE_BYTES}",
                            kind="too_large")
        try:
            rel = workdir.check_relpath(path)
            workdir.write_file(root, rel, data)
        except ValueError as e:
            raise ToolError(str(e), kind="bad_path") from None
        except OSError as e:
            if e.errno in _HOST_TROUBLE:
                raise InfraError(f"cannot write to the work directory: {e.strerror}",
                                 kind="workdir") from None
            # A directory, a file where a directory should be, or a symlink on the way.
            why = ("it is a symbolic link, or the path goes through one" if e.errno == errno.ELOOP
                   else e.strerror or str(e))
            raise ToolError(f"cannot write {short(path)}: {why}", kind="bad_path") from None
        self.reach("wrote_file")
        return f"Wrote {len(data)} bytes to {rel}."

    def run_python(self, code: str = "", path: str = "") -> str:
        """Run Python code, or a .py file from your work directory, and show its output.

        Args:
            code: Python source to run. Give this or path, not both.
            path: A .py file in the work directory to run instead, e.g. solution.py.
        """
        self._require_dir()
        self._check_budget()
        if bool(code.strip()) == bool(path.strip()):
            raise ToolError("give exactly one of code or path", kind="bad_arguments")
        if code.strip():
            if len(_source_bytes(code, "the code")) > MAX_FILE_BYTES:
                raise ToolError(f"the code is longer than {MAX_FILE_BYTES} bytes; write it to a "
                                "file and run the file", kind="too_large")
            argv = ["-c", code]
        else:
            try:
                rel = workdir.check_relpath(path)
            except ValueError as e:
                raise ToolError(str(e), kind="bad_path") from None
            if not workdir.has_file(self._require_dir(), rel):  # follows no link on the host
                raise ToolError(f"no file {rel!r} in the work directory ({self._files()}); "
                                "write it first", kind="not_found")
            # A file named -V, -c or - is still a file, not an interpreter option.
            argv = [f"./{rel}" if rel.startswith("-") else rel]
        result, note = self._run(argv)
        self.reach("ran_code")
        parts = [text.rstrip("\n") for text in (result.stdout, result.stderr) if text.strip()]
        parts.append(result.describe(self.limits) + note)
        return "\n".join(parts) if len(parts) > 1 else "(no output)\n" + parts[0]

    def run_tests(self) -> str:
        """Run the hidden unit tests on your solution and show how many pass."""
        # Only the visible ones; the report says submit also runs held-out ones. (The docstring,
        # which the model reads as the tool's description, is kept so the toolset's fingerprint
        # stays that of stored data and trained adapters.)
        self._check_budget()
        report = self._test(held_out=False)
        if report.all_passed:
            self.reach("tests_passed")
        return report.render()

    def submit(self) -> str:
        """Submit your solution: the hidden tests run one last time and the episode ends."""
        # Every test, the held-out ones too; the result shows counts only.
        report = self._test(held_out=True)
        if report.all_passed:
            self.reach("tests_passed")
        self.report = report
        self.reach("submitted")
        return f"Submitted {self._tests().path}: {report.summary()}."

    # ---- helpers ----------------------------------------------------------------------------

    def _require_dir(self) -> Path:
        if self._workdir is None:
            raise InfraError("CodeEnv used before reset(task)")  # caller bug -> env_fault
        return self._workdir

    def _files(self) -> str:
        """``files: a.py, b/c.py`` (or ``it is empty``), bounded: what a "no such file" error shows."""
        names, more = workdir.list_files(self._require_dir(), limit=20)
        if not names:
            return "it is empty"
        shown = ", ".join(clip(clean_text(n)) for n in names)
        return f"files: {shown}" + (", ..." if more else "")

    def _check_budget(self) -> None:
        budget = RUN_BUDGET_RUNS * self.limits.wall_s
        if self._run_s >= budget:
            raise ToolError(f"this episode's code has run for {self._run_s:.0f} s, its limit of "
                            f"{budget:g} s; only submit still runs the tests", kind="run_budget")

    def _tests(self) -> HiddenTests:
        if self.tests is None:
            raise InfraError("CodeEnv used before reset(task)")
        return self.tests

    def _run(self, argv: list[str], stdin: bytes = b"",
             output_bytes: int | None = None) -> tuple[RunResult, str]:
        """Run python in the sandbox; undo the run's file changes if it overfilled the dir."""
        root = self._require_dir()
        before = workdir.read_tree(root)
        assert self._sandbox is not None
        try:
            result = self._sandbox.run([self._sandbox.python, *argv], stdin=stdin,
                                       output_bytes=output_bytes)
        except (OSError, subprocess.SubprocessError) as e:
            # bwrap or python gone, no processes or memory left to start one: ours, not the
            # model's (its code only ever runs after the start, and what it does is in the result).
            raise InfraError(f"the sandbox could not start: {e}", kind="sandbox") from None
        self._run_s += result.wall_s
        size, entries = workdir.usage(root, max_entries=MAX_WORKDIR_ENTRIES)
        if size <= MAX_WORKDIR_BYTES and entries <= MAX_WORKDIR_ENTRIES:
            return result, ""
        workdir.replace_tree(root, before)  # builds `before` aside, then swaps it in
        left = (f"more than {MAX_WORKDIR_ENTRIES} files" if entries > MAX_WORKDIR_ENTRIES
                else f"{size} bytes in {entries} files")  # the count stops past the limit
        return result, (f"\n[the program left {left} in the work "
                        f"directory (limit {MAX_WORKDIR_BYTES} bytes, {MAX_WORKDIR_ENTRIES} "
                        "files); its file changes were undone]")

    def _test(self, held_out: bool) -> TestReport:
        """Run the visible tests (or all, ``held_out``) against the work directory's module;
        a held-out case's arguments enter the sandbox only with ``held_out``."""
        tests = self._tests()
        if not workdir.has_file(self._require_dir(), tests.path):
            raise ToolError(f"no {tests.path} in the work directory ({self._files()}); write "
                            "your solution there with write_file first", kind="not_found")
        spec = {"module": tests.module, "function": tests.function,
                "timeout": tests.case_timeout_s,
                "args": [c.args for c in (tests.cases if held_out else tests.visible)]}
        # Results are small (values are capped in the runner); the printed output is not.
        result, note = self._run(["-c", RUNNER], stdin=json.dumps(spec).encode(),
                                 output_bytes=max(self.limits.output_bytes, 256_000))
        self.reach("ran_code")
        return judge(tests, result, self.limits, note, held_out=held_out)


def _source_bytes(text: str, what: str, nul_ok: bool = False) -> bytes:
    """``text`` as UTF-8 for a file (``nul_ok``: a data file may hold NUL bytes) or for
    ``python -c`` (an argument cannot); a ToolError for what it cannot hold."""
    if not nul_ok and "\x00" in text:
        raise ToolError(f"{what} contains a NUL character, which Python source cannot hold",
                        kind="bad_text")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError(f"{what} contains a lone surrogate (an invalid character); write it as "
                        "valid text", kind="bad_text") from None
