"""Reading what code under test reports: bounded, validated, and never a crash of the judge.

The code environment's runner prints its results as one marked JSON line, but that line comes out
of a sandbox where the model's code ran: it may be forged, cut, nested a million levels deep,
hold a 100,000-digit number, a lone surrogate or fields of the wrong type. ``read_report`` checks
size and nesting depth *before* ``json.loads`` (whose recursion a deep line would exhaust), then the
shape, and returns either a valid report, ``None`` (no line: the run ended before reporting) or
``Unreadable`` with the reason. The caller counts an unreadable report against the solution (a
failed verdict that says why) — never as an environment fault, which would be retried and left out
of the metrics, so wrong code could opt out of grading.

    report = read_report(result.stdout, MARK)
    if isinstance(report, Unreadable): ...   # every test fails, report.reason says why
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

MAX_REPORT_CHARS = 1_000_000
"""Longest report line read (the runner's honest lines are far shorter: values are capped)."""
MAX_DEPTH = 64
"""Deepest nesting of lists/objects accepted in a report (a value's depth plus the wrapper's 3)."""
MAX_MESSAGE_CHARS = 2000
"""A reported error message is cut to this before anyone reads it."""


class Unreadable(NamedTuple):
    """A report line that cannot be trusted, and why."""

    reason: str


class Report(NamedTuple):
    """A runner report that passed every check."""

    error: str | None
    """Why no case ran (import failed, no such function), or None."""
    cases: list[dict[str, Any]]
    """Per case, ``{"value": JSON}`` or ``{"error": str}``, in the order the cases were given."""


def read_report(stdout: str, mark: str) -> Report | Unreadable | None:
    """The last line of ``stdout`` starting with ``mark``, read and checked; None if none does."""
    line = None
    for candidate in reversed(stdout.splitlines()):
        if candidate.startswith(mark):
            line = candidate[len(mark):]
            break
    if line is None:
        return None
    if len(line) > MAX_REPORT_CHARS:
        return Unreadable(f"the report is {len(line)} characters long (limit {MAX_REPORT_CHARS})")
    depth = nesting_depth(line)
    if depth > MAX_DEPTH:
        return Unreadable(f"the report is nested {depth} levels deep (limit {MAX_DEPTH})")
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as e:  # bad JSON, or a number past the int-string limit
        return Unreadable(f"the report is not valid JSON ({clean(str(e))[:200]})")
    return _shape(data)


def _shape(data: Any) -> Report | Unreadable:
    if not isinstance(data, dict):
        return Unreadable("the report is not a JSON object")
    if "error" in data:
        if not isinstance(data["error"], str):
            return Unreadable("the report's error is not a string")
        return Report(error=clean(data["error"]), cases=[])
    cases = data.get("cases")
    if not isinstance(cases, list):
        return Unreadable("the report has no list of cases")
    out = []
    for i, case in enumerate(cases):
        if not isinstance(case, dict) or not ("value" in case or "error" in case):
            return Unreadable(f"case {i + 1} of the report is neither a value nor an error")
        if "value" in case:
            out.append({"value": case["value"]})
        elif isinstance(case["error"], str):
            out.append({"error": clean(case["error"])})
        else:
            return Unreadable(f"case {i + 1} of the report has an error that is not a string")
    return Report(error=None, cases=out)


def nesting_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of JSON text, outside strings; linear time, no recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def clean(text: str) -> str:
    """``text`` cut to MAX_MESSAGE_CHARS and made valid UTF-8 (a lone surrogate becomes ``?``)."""
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + f"... [{len(text) - MAX_MESSAGE_CHARS} characters cut]"
    return text.encode("utf-8", "replace").decode("utf-8")
