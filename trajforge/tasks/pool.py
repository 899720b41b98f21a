"""Task pools on disk: one ``Task`` per JSONL line, the toolsets they use beside them, and the
report a generator returns.

``write_tasks("runs/x/tasks.jsonl", tasks)`` also writes ``runs/x/toolsets/<fingerprint>.json``
for every toolset its tasks were made with; ``read_tasks`` reads those back (``toolset_for``
finds them afterwards). A plain JSONL without them still loads: a task that names no toolset gets
its environment's current one, derived once from the registry and recorded on the task, and one
without the expert's words gets its environment's (``EnvSpec.reasoning``). Tool-list (``mcp:``)
environments are not derived on read, since building one imports its module.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from trajforge._jsonl import MAX_LINE_BYTES, LineTooLong, jsonl_lines  # noqa: F401 - re-exported
from trajforge.envs.registry import MCP_PREFIX, env_names
from trajforge.envs.toolsets import KNOWN, Toolsets
from trajforge.schema import STORED, Task
from trajforge.tasks.dedup import DuplicateGroup


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
    duplicates: list[DuplicateGroup] = Field(default_factory=list)
    """Kept tasks that repeat each other (a user's questions: same question, same gold query),
    reported rather than dropped; see ``tasks.dedup``."""


def pool_toolsets(path: str | Path) -> Toolsets:
    """The ``toolsets/`` folder beside a pool file."""
    return Toolsets(Path(path).parent / "toolsets", parent=KNOWN)


def write_tasks(path: str | Path, tasks: Iterable[Task]) -> Path:
    """Write tasks as JSONL, atomically (a crash never leaves a half-written pool), and the
    toolsets they name into ``toolsets/`` beside it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tasks = [recorded(t) for t in tasks]
    folder = pool_toolsets(path)
    for fp in sorted({t.toolset_fingerprint for t in tasks if t.toolset_fingerprint}):
        if fp in KNOWN:  # a task copied from a pool without its toolsets/ keeps just its fingerprint
            folder.add(KNOWN.get(fp))
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


class TaskPoolError(ValueError):
    """A task pool with unreadable lines; ``tasks`` holds every task that was read."""

    def __init__(self, path: str | Path, problems: list[str], tasks: list[Task]):
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        super().__init__(f"{path}: {len(problems)} unreadable task lines: {shown}")
        self.problems, self.tasks = problems, tasks


def read_tasks(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES) -> list[Task]:
    """Read a JSONL task pool (and its toolsets). Bad lines (invalid JSON or UTF-8, a wrong field,
    too long, an id a line above already has) raise one ``TaskPoolError`` naming each as ``file:line: what``, after the whole file
    was read; a record of a newer format raises ``NewerFormatError``."""
    pool_toolsets(path).load()
    tasks, problems = [], []
    first_line: dict[str, int] = {}
    for lineno, line in jsonl_lines(path, max_line_bytes):
        try:
            if isinstance(line, LineTooLong):
                raise line
            task = Task.model_validate_json(line, context=STORED)
            # One id, one task: pools joined with ``cat`` could hold a task in train and in test,
            # and every store keys episodes by task id.
            if task.id in first_line:
                problems.append(f"{path}:{lineno}: task id {task.id!r} is already on line {first_line[task.id]}")
                continue
            first_line[task.id] = lineno
            tasks.append(task)
        except ValidationError as e:
            first = e.errors(include_url=False)[0]
            field = ".".join(map(str, first["loc"]))
            what = f"{field}: {first['msg']}" if field else first["msg"]
            problems.append(f"{path}:{lineno}: invalid task ({what})")
        except LineTooLong as e:
            problems.append(f"{path}:{lineno}: {e}")
    tasks = [recorded(t) for t in tasks]
    if problems:
        raise TaskPoolError(path, problems, tasks)
    return tasks


def recorded(task: Task) -> Task:
    """``task`` with its toolset fingerprint and expert words filled in from its environment where
    it lacks them (see the module docstring); unchanged for unknown and ``mcp:`` environments."""
    if task.env.startswith(MCP_PREFIX) or task.env not in env_names():
        return task
    from trajforge.tasks.verify import stamp_toolset, with_words

    return with_words(stamp_toolset(task))

