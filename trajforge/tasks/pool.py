"""Task pools on disk: one ``Task`` per JSONL line, plus the report a generator returns."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from trajforge.schema import Task


class Rejection(BaseModel):
    """One discarded candidate, with where it came from, so a user can fix it."""

    reason: str
    """Why (``bad_json``, ``invalid_call``, ``tool_error``, ``duplicate``, ``sql_error``, ...)."""
    detail: str = ""
    """What exactly was wrong, in words."""
    source: str = ""
    """Where the candidate came from: ``Q.jsonl:12`` or ``request 7``."""
    tier: str | None = None
    """The tier the candidate was meant for, when known."""


class SynthReport(BaseModel):
    """What a task generator produced and what it threw away."""

    tasks: list[Task] = Field(default_factory=list)
    """Verified tasks, grouped by split (train, test, heldout)."""
    dropped: dict[str, int] = Field(default_factory=dict)
    """Candidates discarded, by reason (duplicate, reference_error, empty_result, ...)."""
    rejected: list[Rejection] = Field(default_factory=list)
    """Discarded candidates one by one, where a generator knows them individually (LLM proposals,
    bring-your-own questions); ``dropped`` always holds the counts."""


def write_tasks(path: str | Path, tasks: Iterable[Task]) -> Path:
    """Write tasks as JSONL, atomically (a crash never leaves a half-written pool)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for task in tasks:
                f.write(task.model_dump_json() + "\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


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


class TaskPoolError(ValueError):
    """A task pool with unreadable lines; ``tasks`` holds every task that was read."""

    def __init__(self, path: str | Path, problems: list[str], tasks: list[Task]):
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        super().__init__(f"{path}: {len(problems)} unreadable task lines: {shown}")
        self.problems, self.tasks = problems, tasks


def read_tasks(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES) -> list[Task]:
    """Read a JSONL task pool. Bad lines (invalid JSON or UTF-8, a wrong field, too long) raise one
    ``TaskPoolError`` naming each as ``file:line: what``, after the whole file was read."""
    tasks, problems = [], []
    for lineno, line in jsonl_lines(path, max_line_bytes):
        try:
            if isinstance(line, LineTooLong):
                raise line
            tasks.append(Task.model_validate_json(line))
        except ValidationError as e:
            first = e.errors(include_url=False)[0]
            field = ".".join(map(str, first["loc"]))
            what = f"{field}: {first['msg']}" if field else first["msg"]
            problems.append(f"{path}:{lineno}: invalid task ({what})")
        except LineTooLong as e:
            problems.append(f"{path}:{lineno}: {e}")
    if problems:
        raise TaskPoolError(path, problems, tasks)
    return tasks
