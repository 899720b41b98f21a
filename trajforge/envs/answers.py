"""Comparing a submitted answer with an expected one: numbers, names and lists, as people write them.

Used by every environment whose tasks have one right answer (``sql``, tool-list ``mcp``
environments, an LLM's claimed answer during synthesis); shared infrastructure, not SQL's.
"""

from __future__ import annotations

import json
import re
from typing import Any

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")
_LIST_SEP = re.compile(r"\s*(?:,|;|\n|\band\b|&)\s*", re.I)


def answers_match(submitted: Any, expected: Any) -> bool:
    """Whether a submitted answer matches the expected one.

    Numbers: the submission must contain exactly one number ("7", "7.0", "$1,234.50",
    "The answer is 7"), equal within abs 0.01 or rel 1e-4 — a string listing many numbers
    must not match by luck. Strings: case- and whitespace-insensitive. Lists: order-free sets;
    the submission may be a JSON list or items separated by commas, newlines or "and".
    """
    if submitted is None or expected is None:
        return False
    if isinstance(expected, (list, tuple)):
        return _as_set(submitted) == {normalized(e) for e in expected}
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        value = _one_number(submitted)
        return value is not None and _close(value, float(expected))
    return normalized(submitted) == normalized(expected)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 0.01 or abs(a - b) <= 1e-4 * abs(b)


def _one_number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer past float's range (10**400): the model's, so no match
            return None
    found = _NUMBER.findall(str(value))
    if len(found) != 1:
        return None
    return float(found[0].replace(",", ""))


def normalized(value: Any) -> str:
    """Casefold, collapse whitespace, drop surrounding quotes and a trailing period."""
    text = " ".join(str(value).split()).casefold()
    return text.rstrip(".").strip().strip("\"'`").strip()


def _as_set(submitted: Any) -> set[str]:
    items: Any = submitted
    if isinstance(submitted, str) and submitted.strip().startswith("["):
        try:
            items = json.loads(submitted)
        except (ValueError, RecursionError):  # bad JSON, nested too deep, or an integer past the
            # digit limit: the model wrote it, so it is an answer to judge, never a crash of verify
            items = submitted.strip().strip("[]")
    if isinstance(items, str):
        items = _LIST_SEP.split(items)
    if not isinstance(items, (list, tuple)):
        items = [items]
    # Bullets ("- Ana Silva", "1. Ana Silva") are how models often write lists.
    cleaned = (re.sub(r"^\s*(?:[-*\u2022]|\d+[.)])\s+", "", str(i)) for i in items)
    return {n for n in (normalized(i) for i in cleaned) if n}
