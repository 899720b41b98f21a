"""Reading JSONL files line by line, safely: one helper for task pools, imports and exports.

A root module (like ``_compat``) because both ``tasks`` and ``store`` read user-provided JSONL
and neither layer may import the other.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest JSONL line read (a task, an imported conversation); a longer one is refused, not loaded."""


class LineTooLong(ValueError):
    """A JSONL line over the reader's limit."""


def jsonl_lines(path: str | Path, max_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes | LineTooLong]]:
    """(line number, bytes) of each non-blank line of a JSONL file, read in binary so that invalid
    UTF-8 is the caller's per-line error, not the file's; a line over ``max_bytes`` comes as a
    ``LineTooLong`` (and is skipped without being held in memory), so reading goes on after it."""
    with open(path, "rb") as f:
        lineno = 0
        while line := f.readline(max_bytes + 1):
            lineno += 1
            if len(line) > max_bytes and not line.endswith(b"\n"):
                while (rest := f.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
                yield lineno, LineTooLong(f"line is over {max_bytes} bytes")
            elif line.strip():
                yield lineno, line
