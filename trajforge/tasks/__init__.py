"""Task pools: template generators with executed reference solutions, splits and JSONL storage.

Each environment registers one template generator in ``GENERATORS`` (``(n, seed) -> SynthReport``,
imported lazily so ``import trajforge.tasks`` stays cheap). LLM-driven synthesis
(``trajforge.tasks.llm``) and bring-your-own SQLite questions (``trajforge.tasks.byo_sql``) build
on the same verified-task contract.
"""

from __future__ import annotations

from typing import Callable

from trajforge.tasks.pool import Rejection, SynthReport, read_tasks, write_tasks


def _sql(n: int, seed: int) -> SynthReport:
    from trajforge.tasks.sql import generate_sql_tasks

    return generate_sql_tasks(n, seed=seed)


def _travel(n: int, seed: int) -> SynthReport:
    from trajforge.tasks.travel import generate_travel_tasks

    return generate_travel_tasks(n, seed=seed)


def _web(n: int, seed: int) -> SynthReport:
    from trajforge.tasks.web import generate_web_tasks

    return generate_web_tasks(n, seed=seed)


def _code(n: int, seed: int) -> SynthReport:
    from trajforge.tasks.code import generate_code_tasks

    return generate_code_tasks(n, seed=seed)


GENERATORS: dict[str, Callable[[int, int], SynthReport]] = {
    "sql": _sql,
    "travel": _travel,
    "web": _web,
    "code": _code,
}
"""Template generator per environment name: ``generator(n, seed)``."""


def synthesize(env: str, n: int, seed: int) -> SynthReport:
    """Generate ``n`` verified tasks for environment ``env`` (split train/test/heldout)."""
    if env not in GENERATORS:
        raise ValueError(f"no task generator for environment {env!r}; known: {sorted(GENERATORS)}")
    return GENERATORS[env](n, seed)


__all__ = ["GENERATORS", "Rejection", "SynthReport", "read_tasks", "synthesize", "write_tasks"]
