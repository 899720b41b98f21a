"""Execution accuracy: does a submitted query's result equal the gold query's result?

    expected = gold_expected(result, gold_sql)            # stored as Task.expected
    match = compare_results(expected, submitted_result)   # Match(ok, detail)

The rules are the ones text-to-SQL benchmarks score with (Spider, BIRD), with floating-point noise
forgiven:

* rows form a multiset: the same rows in any order, each as often as in the gold result; under
  ``compare="set"`` (as BIRD does) a set: duplicates and order do not count;
* columns are matched up to a permutation (``SELECT b, a`` answers ``SELECT a, b``), never by
  name (``COUNT(*)`` and ``COUNT(*) AS n`` are one column);
* numbers compare as numbers (``3`` equals ``3.0``; ``SUM`` and ``TOTAL`` agree), within a
  relative tolerance ``REL_TOL`` (an ``AVG`` summed in another order still matches); text is
  compared exactly (``'3'`` is not ``3``); NULL equals NULL; blobs by their bytes;
* order counts only when the gold query has an outer ``ORDER BY`` (``ordered_by``): an
  ``ORDER BY`` inside a subquery, a CTE or a window does not order the result;
* two empty results are equal whatever their columns (there is nothing to compare);
* a result cut at the cap (more rows or bytes than ``GuardedDb.rows`` returns) is never equal.

Why not compare sorted row strings: tolerance cannot be hashed, and a column permutation changes
every row. Rows are sorted on their exact part (text, NULLs, blobs) and then their numbers, and
compared pairwise with the tolerance; column permutations are searched only among columns whose
values already match as a multiset, so in practice exactly one permutation is tried.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, NamedTuple

from trajforge.envs.sqlguard import ResultSet

Compare = Literal["multiset", "set"]
COMPARES: tuple[str, ...] = ("multiset", "set")
REL_TOL = 1e-6
"""Relative tolerance between two numbers (at least one of them a float)."""
ABS_TOL = 1e-9
"""Absolute tolerance, for floats that should be 0."""
MAX_PERMUTATIONS = 1000
"""Column assignments tried before a result is declared different (many identical columns)."""

Row = tuple[Any, ...]


class Match(NamedTuple):
    """The verdict of one comparison, with what differed in words."""

    ok: bool
    detail: str


# ---- the gold result as stored ------------------------------------------------------------------

def gold_expected(result: ResultSet, query: str, compare: Compare = "multiset") -> dict[str, Any]:
    """What an execution-accuracy task stores as ``Task.expected``: the gold result's columns and
    rows (JSON values, a blob as ``{"blob": HEX}``), whether its order counts, how rows compare."""
    if compare not in COMPARES:
        raise ValueError(f"compare must be one of {', '.join(COMPARES)}, not {compare!r}")
    return {"columns": list(result.columns),
            "rows": [[{"blob": v.hex()} if isinstance(v, bytes) else v for v in row] for row in result.rows],
            "ordered": ordered_by(query), "compare": compare}


def expected_rows(expected: dict[str, Any]) -> list[Row]:
    """The gold rows of a stored expectation, as Python values."""
    return [tuple(bytes.fromhex(c["blob"]) if isinstance(c, dict) else c for c in row)
            for row in expected.get("rows", [])]


def is_result_expectation(expected: Any) -> bool:
    """Whether ``expected`` is an execution-accuracy expectation (``gold_expected``'s shape)."""
    return isinstance(expected, dict) and isinstance(expected.get("rows"), list) and "columns" in expected


def compare_results(expected: dict[str, Any], got: ResultSet, rel_tol: float = REL_TOL) -> Match:
    """Compare a submitted query's result with a stored gold expectation."""
    if not got.complete:
        return Match(False, f"the query's result was cut at the cap ({len(got.rows)} rows read); "
                     "the gold result is smaller")
    gold = expected_rows(expected)
    as_set = expected.get("compare") == "set"
    return same_result(gold, len(expected.get("columns", [])), list(got.rows), len(got.columns),
                       ordered=bool(expected.get("ordered")) and not as_set, as_set=as_set, rel_tol=rel_tol)


def same_result(gold: list[Row], gold_width: int, got: list[Row], got_width: int, *, ordered: bool,
                as_set: bool, rel_tol: float = REL_TOL) -> Match:
    """The comparison itself (see the module docstring)."""
    if not gold and not got:
        return Match(True, "both results are empty")
    if gold_width != got_width:
        return Match(False, f"the query returned {got_width} columns; the gold result has {gold_width}")
    if as_set:
        gold, got = _distinct(gold, rel_tol), _distinct(got, rel_tol)
    what = "distinct rows" if as_set else "rows"
    if len(gold) != len(got):
        return Match(False, f"the query returned {len(got)} {what}; the gold result has {len(gold)}")
    for order in _column_orders(gold, got, gold_width, as_set, rel_tol):
        permuted = [tuple(row[j] for j in order) for row in got]
        if _same_rows(gold, permuted, ordered, rel_tol):
            return Match(True, f"same result ({_count(len(gold), what)}, {_count(gold_width, 'columns')})")
        if ordered and _same_rows(gold, permuted, False, rel_tol):
            return Match(False, "the right rows, but not in the order of the gold query's ORDER BY")
    return Match(False, f"the result differs from the gold result ({_count(len(gold), what)}, "
                 f"{_count(gold_width, 'columns')})")


def _count(n: int, plural: str) -> str:
    return f"{n} {plural if n != 1 else plural.removesuffix('s')}"


# ---- values -------------------------------------------------------------------------------------

def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def cells_equal(a: Any, b: Any, rel_tol: float = REL_TOL) -> bool:
    """One value against another: numbers as numbers (with tolerance once a float is involved),
    everything else by type and value."""
    if _is_number(a) and _is_number(b):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=ABS_TOL)
    return type(a) is type(b) and a == b


def _rows_equal(a: Row, b: Row, rel_tol: float) -> bool:
    return all(cells_equal(x, y, rel_tol) for x, y in zip(a, b))


def _exact_key(v: Any) -> tuple:
    """The part of a value compared exactly; numbers all share one key (their value sorts next)."""
    if v is None:
        return (0,)
    if _is_number(v):
        return (1,)
    if isinstance(v, str):
        return (2, v)
    if isinstance(v, bytes):
        return (3, v)
    return (4, repr(v))


def _number_key(v: Any) -> float:
    if not _is_number(v):
        return 0.0
    f = float(v)
    return math.inf if math.isnan(f) else f


def _row_key(row: Row) -> tuple:
    return tuple(_exact_key(v) for v in row), tuple(_number_key(v) for v in row)


def _same_rows(gold: list[Row], got: list[Row], ordered: bool, rel_tol: float) -> bool:
    if not ordered:
        gold, got = sorted(gold, key=_row_key), sorted(got, key=_row_key)
    return all(_rows_equal(g, h, rel_tol) for g, h in zip(gold, got))


def _distinct(rows: list[Row], rel_tol: float) -> list[Row]:
    out: list[Row] = []
    for row in sorted(rows, key=_row_key):
        if not out or not _rows_equal(out[-1], row, rel_tol):
            out.append(row)
    return out


def _column_orders(gold: list[Row], got: list[Row], width: int, as_set: bool, rel_tol: float):
    """Assignments ``order`` (gold column i is submitted column order[i]) worth trying: each gold
    column goes to a submitted column holding the same values; the identity first."""
    def values(rows: list[Row], j: int) -> list[Any]:
        column = [r[j] for r in rows]
        return _distinct([(v,) for v in column], rel_tol) if as_set else sorted(((v,) for v in column), key=_row_key)

    gold_cols = [values(gold, i) for i in range(width)]
    got_cols = [values(got, j) for j in range(width)]
    fits = [[j for j in range(width) if len(gold_cols[i]) == len(got_cols[j])
             and all(_rows_equal(a, b, rel_tol) for a, b in zip(gold_cols[i], got_cols[j]))]
            for i in range(width)]
    for i in range(width):  # identity first, then the others
        if i in fits[i]:
            fits[i].remove(i)
            fits[i].insert(0, i)
    tried = 0
    order: list[int] = []
    used: set[int] = set()

    def search(i: int):
        nonlocal tried
        if tried >= MAX_PERMUTATIONS:
            return
        if i == width:
            tried += 1
            yield list(order)
            return
        for j in fits[i]:
            if j not in used:
                used.add(j)
                order.append(j)
                yield from search(i + 1)
                order.pop()
                used.discard(j)

    yield from search(0)


# ---- the gold query's shape ---------------------------------------------------------------------

_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?(?:\*/|$)", re.S)
_ORDER_BY = re.compile(r"\border\s+by\b", re.I)


def ordered_by(sql: str) -> bool:
    """Whether the query's result is ordered: an ``ORDER BY`` outside every parenthesis (not in a
    subquery, a CTE body, a window or a function call), after quotes and comments are removed."""
    text = _QUOTED.sub(" ", sql)
    outer, depth = [], 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            outer.append(ch)
    return bool(_ORDER_BY.search("".join(outer)))


__all__ = ["ABS_TOL", "COMPARES", "Compare", "MAX_PERMUTATIONS", "Match", "REL_TOL", "cells_equal",
           "compare_results", "expected_rows", "gold_expected", "is_result_expectation", "ordered_by",
           "same_result"]
