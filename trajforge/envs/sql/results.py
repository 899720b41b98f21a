"""What ``run_sql`` shows the agent, and reading it back: one format, written and parsed here.

``run_sql`` output format (``read_result`` parses it back)::

    name|price
    Trail Running Shoes|129.99
    Yoga Mat|24.5
    (2 rows)

One header line, one line per row, cells joined by ``|``; inside a cell ``\\``, ``|`` and newlines
are escaped as ``\\\\``, ``\\|`` and ``\\n``; SQL NULL is ``NULL``; blobs show as
``<blob N bytes>``; a cell over 200 characters ends in ``...(+N chars)``. The last line is
always ``(N rows)`` (``(1 row)``) or ``... (truncated: 50 of 1234 rows shown)``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from trajforge.envs.answers import answers_match, normalized

CELL_CHARS = 200
"""A rendered cell longer than this is cut, so one huge value can't fill the model's context."""
COUNT_LIMIT = 10_000
"""Rows past the shown ones are only counted, and only up to this many."""


def format_cell(value: Any) -> str:
    """One value as the model sees it (escaped, cut to CELL_CHARS)."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"<blob {len(value)} bytes>"
    if isinstance(value, float):
        # Round away float noise (1234.5600000000002) but keep enough digits for averages.
        return repr(round(value, 6)) if math.isfinite(value) else repr(value)
    text = str(value)
    if len(text) > CELL_CHARS:
        text = f"{text[:CELL_CHARS]}...(+{len(text) - CELL_CHARS} chars)"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "\\n").replace("\r", "\\r")


def render_rows(columns: list[str], rows: Any, max_rows: int, max_chars: int
                ) -> tuple[str, list[list[str]]]:
    """Render a cursor's rows; returns (text, cells of the rows shown)."""
    lines = ["|".join(format_cell(c) for c in columns)]
    shown: list[list[str]] = []
    size = len(lines[0])
    total = 0
    full = False  # once a cap is hit, later rows are only counted
    it = iter(rows)
    for row in it:
        total += 1
        if not full:
            cells = [format_cell(v) for v in row]
            line = "|".join(cells)
            if len(shown) >= max_rows or size + len(line) + 1 > max_chars:
                full = True
            else:
                shown.append(cells)
                lines.append(line)
                size += len(line) + 1
        if total >= COUNT_LIMIT:
            # Don't scan a million-row result just to count it.
            if next(it, None) is not None:
                lines.append(f"... (truncated: {len(shown)} of {COUNT_LIMIT}+ rows shown)")
                return "\n".join(lines), shown
            break
    if len(shown) < total:
        lines.append(f"... (truncated: {len(shown)} of {total} rows shown)")
    else:
        lines.append(f"({total} row{'' if total == 1 else 's'})")
    return "\n".join(lines), shown


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


def result_contains(cells: list[list[str]], expected: Any) -> bool:
    """Whether query result cells contain the expected answer (all items, for lists)."""
    if expected is None:
        return False
    flat = [c for row in cells for c in row]
    if isinstance(expected, (list, tuple)):
        have = {normalized(c) for c in flat}
        return bool(expected) and all(normalized(e) in have for e in expected)
    return any(answers_match(c, expected) for c in flat)


__all__ = ["CELL_CHARS", "COUNT_LIMIT", "format_cell", "read_result", "render_rows", "result_contains",
           "typed_cell"]
