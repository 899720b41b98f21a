"""Task pools on disk: one ``Task`` per JSONL line, plus the report a generator returns."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
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


def read_tasks(path: str | Path) -> list[Task]:
    """Read a JSONL task pool; a bad line raises ``ValueError`` naming the file and line."""
    tasks = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                tasks.append(Task.model_validate_json(line))
            except ValidationError as e:
                raise ValueError(f"{path}:{lineno}: invalid task: {e}") from None
    return tasks
