"""What ``run_sql`` shows the agent, and reading it back: one format, written and parsed here.

``run_sql`` output format (``read_result`` parses it back)::

    name|price
    Trail Running Shoes|129.99
    Yoga Mat|24.5
    (2 rows)

One header line, one line per row, cells joined by ``|``; inside a cell ``\\``, ``|`` and newlines
are escaped as ``\\\\``, ``\\|`` and ``\\n``; SQL NULL is ``NULL``; blobs show as
``<blob N bytes>``; a cell over 200 characters ends in ``...(+N chars)``. The last line is
always ``(N rows)`` (``(1 row)``) or ``... (truncated: 50 of 1234 rows shown)``; after a result
that found nothing (no row, or one row of NULLs) ``run_sql`` adds on that line why that usually
happens (``(0 rows) — no row matched. If one should have, ...``: ``sql/hints.py``).
"""

from __future__ import annotations

import re
from typing import Any

from trajforge.envs.answers import answers_match, normalized

# Rendering runs in the SQL worker process (plain stdlib there), so it lives in its module.
from trajforge.envs.sqlworker import CELL_CHARS, COUNT_LIMIT, format_cell, render_rows  # noqa: E402,F401


def read_result(text: str) -> list[list[str]]:
    """Parse ``run_sql`` output back into rows of cell strings (header and footer dropped)."""
    lines = text.split("\n")
    if len(lines) < 2:
        raise ValueError("not a run_sql result: expected a header and a footer line")
    return [_split_cells(line) for line in lines[1:-1]]


def _split_cells(line: str) -> list[str]:
    cells, buf, i = [], [], 0
    unescape = {"\\": "\\", "|": "|", "n": "\n", "r": "\r"}
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            buf.append(unescape.get(line[i + 1], line[i + 1]))
            i += 2
            continue
        if ch == "|":
            cells.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    cells.append("".join(buf))
    return cells


def typed_cell(cell: str) -> Any:
    """A result cell as an expected value: int or float when it reads as a number, else text."""
    if re.fullmatch(r"-?\d+", cell):
        return int(cell)
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+)(e[-+]?\d+)?", cell, re.I):
        return float(cell)
    return cell


def found_nothing(cells: list[list[str]]) -> bool:
    """Whether a result's cells say the query found nothing: no row, or one row of NULLs (an
    aggregate such as ``SUM`` or ``MAX`` over no rows)."""
    return not cells or (len(cells) == 1 and all(c == "NULL" for c in cells[0]))


def result_contains(cells: list[list[str]], expected: Any) -> bool:
    """Whether query result cells contain the expected answer (all items, for lists)."""
    if expected is None:
        return False
    flat = [c for row in cells for c in row]
    if isinstance(expected, (list, tuple)):
        have = {normalized(c) for c in flat}
        return bool(expected) and all(normalized(e) in have for e in expected)
    return any(answers_match(c, expected) for c in flat)


_STRING = re.compile(r"'((?:[^']|'')*)'")
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])")
_PAGING = re.compile(r"\b(?:LIMIT|OFFSET)\s+\d+(?:\s*,\s*\d+)?", re.IGNORECASE)
_LAST_ARG = re.compile(r",\s*\d+\s*\)")  # ROUND(x, 2)'s digits
_CASE_WORD = re.compile(r"\b(?:CASE|END)\b", re.IGNORECASE)


def _drop_cases(query: str) -> str:
    """``query`` with each ``CASE ... END`` (to the first END after it) put as one space. One pass
    over the words: the lazy regex ``CASE.*?END`` scanned to the end of the text from every CASE
    that had no END after it, so 4,000 CASEs in a comment took seconds (quadratic)."""
    out, pos, opened = [], 0, None
    for m in _CASE_WORD.finditer(query):
        if opened is None:
            opened = m.start() if m.group().upper() == "CASE" else None
        elif m.group().upper() == "END":
            out += [query[pos:opened], " "]
            pos, opened = m.end(), None
    out.append(query[pos:])
    return "".join(out)


def spelled_values(query: str) -> list[str]:
    """The values a query writes itself: its string literals and numbers, less those that only
    page (``LIMIT``/``OFFSET``), round (a call's last numeric argument) or are a ``CASE``'s
    branches (the data picks among those)."""
    q = _drop_cases(query)
    strings = [m.replace("''", "'") for m in _STRING.findall(q)]
    rest = _LAST_ARG.sub(")", _PAGING.sub(" ", _STRING.sub(" ", q)))
    return strings + _NUMBER.findall(rest)


# ``[`` is not allowed inside a bracketed name: else every ``[`` of a run with no ``]`` (a comment
# of 20,000 of them) scanned to the end of the query, quadratic.
_NAME = re.compile(r'"([^"]+)"|`([^`]+)`|\[([^\]\[]+)\]|([A-Za-z_][\w$]*)')


def names_in(query: str) -> set[str]:
    """The identifiers a query names outside its string literals, unquoted, lower case."""
    return {next(g for g in m.groups() if g).lower() for m in _NAME.finditer(_STRING.sub(" ", query))}


def spells_answer(query: str, expected: Any) -> bool:
    """Whether ``query`` writes the expected answer itself (``SELECT '9'``, ``SELECT 9 FROM t``):
    then a result holding it was not found in the data. No reference query of the shipped
    catalog (1,684 over five seeds) or of benchmarks/text2sql (502) spells its answer."""
    values = spelled_values(query)
    if isinstance(expected, (list, tuple)):
        return bool(expected) and all(any(answers_match(v, e) for v in values) for e in expected)
    return any(answers_match(v, expected) for v in values)


__all__ = ["CELL_CHARS", "COUNT_LIMIT", "format_cell", "found_nothing", "read_result", "render_rows",
           "names_in", "result_contains", "spelled_values", "spells_answer", "typed_cell"]
