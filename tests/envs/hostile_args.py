"""Hostile tool arguments, and the check every environment must pass on each of them.

Issue 15's rule: whatever a model puts in a call's arguments, the tool's answer is a result the
model sees — a success or a typed tool error — never an ``env_fault`` (which would be retried and
left out of the metrics) and never an exception out of ``execute``. ``hostile_cases(baseline)``
turns one valid call of a tool into many calls, each with one argument replaced by something
hostile: lone surrogates, control characters and NUL bytes, megabyte strings and URLs, paths that
climb out (``../../etc/passwd``), numbers past every limit (``10**400``, ``1e308``, NaN), wrong
JSON types — including the ones schema validation would have stopped, since an environment must
hold when called directly — nesting 200 levels deep, and an argument the tool does not take.
``check`` then says what, if anything, is wrong with one result.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, NamedTuple

from trajforge.envs.base import MAX_ERROR_CHARS, MAX_RESULT_CHARS
from trajforge.schema import ToolCall, ToolResult


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE_TEXT: dict[str, str] = {
    "lone surrogates": "\ud800abc\udfff",
    "surrogate pair halves": "\ud83d\ude00 \ud83d",
    "control characters": "a\x01\x02\x1b[31mred\x7f\x08\r\n\t",
    "nul bytes": "x\x00y\x00",
    "nul element marker": "\x0099\x00",
    "megabyte string": "A" * 1_000_000,
    "huge url": "/search?q=" + "x" * 200_000,
    "long url path": "/" + "a/" * 5000,
    "absolute url elsewhere": "http://169.254.169.254/latest/meta-data/",
    "file url": "file:///etc/passwd",
    "path climbing out": "../../etc/passwd",
    "absolute path": "/etc/shadow",
    "windows path": "..\\..\\windows\\system32",
    "empty": "",
    "whitespace": " \t\n ",
    "sql injection": "x'; DROP TABLE customers; --",
    "format strings": "%s%n%x{0}{__class__}${HOME}",
    "bidi and combining": "\u202egnp.exe\u0301\u0336",
    "emoji": "\U0001f600" * 50,
    "number as text past limits": "9" * 5000,
    "json in text": '{"a": [1, 2, {"b": null}]}',
    "markup": "<script>alert(1)</script><tool_call>{}</tool_call><|im_start|>",
}
HOSTILE_VALUES: dict[str, Any] = {
    "none": None,
    "true": True,
    "negative": -1,
    "zero": 0,
    "int past int64": 2 ** 63,
    "int of 400 digits": 10 ** 400,
    "negative huge": -(10 ** 400),
    "float huge": 1e308,
    "float tiny": 5e-324,
    "nan": float("nan"),
    "infinity": float("inf"),
    "fraction": 1.5,
    "empty list": [],
    "list of strings": ["a", "b"],
    "long list": list(range(100_000)),
    "empty object": {},
    "object": {"key": "value", "n": 1},
    "nested 200 deep": _nested(200),
}


class Case(NamedTuple):
    """One hostile call and what it replaces."""

    label: str
    call: ToolCall


def hostile_cases(baseline: ToolCall) -> list[Case]:
    """Every hostile variant of a valid ``baseline`` call: each argument replaced in turn by every
    hostile text and value, plus the call with an argument the tool does not take."""
    cases = []
    for name in baseline.arguments or {"<none>": None}:
        for label, value in {**HOSTILE_TEXT, **HOSTILE_VALUES}.items():
            args = dict(baseline.arguments)
            if name != "<none>":
                args[name] = value
            cases.append(Case(f"{baseline.name}({name}={label})",
                              ToolCall(name=baseline.name, arguments=args)))
    extra = {**baseline.arguments, "unexpected_argument": "x"}
    cases.append(Case(f"{baseline.name}(+unexpected_argument)",
                      ToolCall(name=baseline.name, arguments=extra)))
    return cases


def check(result: ToolResult | BaseException, elapsed_s: float, budget_s: float) -> str | None:
    """What is wrong with one hostile call's outcome (None: a model-visible result, in time)."""
    if isinstance(result, BaseException):
        return f"execute raised {type(result).__name__}: {str(result)[:200]}"
    if result.fault or result.error == "env_fault":
        return f"classified as an env fault ({result.error}): {result.content[:200]}"
    if not result.ok and not result.error:
        return "an error without a kind"
    try:
        json.dumps(result.model_dump(), ensure_ascii=False).encode("utf-8")
    except (ValueError, UnicodeError) as e:
        return f"the result is not storable JSON: {e}"
    cap = MAX_RESULT_CHARS if result.ok else MAX_ERROR_CHARS
    if len(result.content) > cap + 100:
        return f"{len(result.content)} characters of {'output' if result.ok else 'error'}"
    if elapsed_s > budget_s:
        return f"took {elapsed_s:.2f} s (budget {budget_s:g} s)"
    return None


def run_cases(execute: Callable[[ToolCall], ToolResult], cases: list[Case], budget_s: float,
              between: Callable[[], None] | None = None) -> list[str]:
    """Run every case (``between()`` after each, to put the environment back where needed);
    the problems found, one line per bad case."""
    problems = []
    for case in cases:
        start = time.monotonic()
        try:
            outcome: ToolResult | BaseException = execute(case.call)
        except Exception as e:  # noqa: BLE001 - reported as the problem it is
            outcome = e
        problem = check(outcome, time.monotonic() - start, budget_s)
        if problem:
            problems.append(f"{case.label}: {problem}")
        if between is not None:
            between()
    return problems
