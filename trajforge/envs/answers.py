"""Comparing a submitted answer with an expected one: numbers, names and lists, as people write them.

Used by every environment whose tasks have one right answer (``sql``, tool-list ``mcp``
environments, an LLM's claimed answer during synthesis); shared infrastructure, not SQL's.
"""

from __future__ import annotations

import json
import re
from typing import Any

# An exponent belongs to its number: the SQL environment shows floats past 1e16 or under 1e-4 as
# Python writes them (1.5e+16, 5e-05), and so does a JSON number coerced to a string answer.
_NUMBER = re.compile(r"(?:[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+)(?:[eE][-+]?\d+)?")
_MINUS = str.maketrans({"\u2212": "-", "\uff0d": "-"})
"""The minus sign (U+2212) and the fullwidth hyphen-minus read as '-': else '−7' read as 7."""
# No ``\s*`` around the separator: tried at every space of a long run it made the split quadratic
# (a 20,000-space answer took 40 s to grade); ``normalized`` trims the items anyway.
_LIST_SEP = re.compile(r",|;|\n|\band\b|&", re.I)


def answers_match(submitted: Any, expected: Any) -> bool:
    """Whether a submitted answer matches the expected one.

    Numbers: the submission must contain exactly one number ("7", "7.0", "$1,234.50", "1.5e+16",
    "−7", "The answer is 7"), equal within abs 0.01 or rel 1e-4 — a string listing many numbers
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
    found = _NUMBER.findall(str(value).translate(_MINUS))
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
