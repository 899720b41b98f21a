"""Task pools: template generators with executed reference solutions, splits and JSONL storage."""

from __future__ import annotations

from trajforge.tasks.pool import SynthReport, read_tasks, write_tasks


def synthesize(env: str, n: int, seed: int) -> SynthReport:
    """Generate ``n`` verified tasks for environment ``env`` (split train/test/heldout)."""
    if env == "sql":
        from trajforge.tasks.sql import generate_sql_tasks

        return generate_sql_tasks(n, seed=seed)
    raise ValueError(f"no task generator for environment {env!r}; known: ['sql']")


__all__ = ["SynthReport", "read_tasks", "synthesize", "write_tasks"]
