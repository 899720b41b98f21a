"""Reading JSONL files line by line, safely: one helper for task pools, imports and exports; and
the one reader of small JSON-object files (an adapter's meta, a ``dataset_info.json``).

A root module (like ``_compat``) because both ``tasks`` and ``store`` read user-provided JSONL
and neither layer may import the other.
"""

from __future__ import annotations

import json
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


def read_json_object(path: str | Path, fix: str) -> dict:
    """The JSON object a small file holds; a ValueError naming the file, what is wrong with it and
    ``fix`` (what the user can do) when it cannot be read, is not JSON (torn by a killed write,
    hand-edited, not UTF-8, nested too deeply, an integer past the int-string limit) or holds
    another JSON value."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:  # a folder where the file goes, no permission (a missing file: the caller's check)
        raise ValueError(f"{path} cannot be read ({e.strerror or e}); {fix}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not valid JSON (not UTF-8: {e.reason}); {fix}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{path} is not valid JSON ({str(e)[:200]}); {fix}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}, not an object; {fix}")
    return data
