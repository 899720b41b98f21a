"""Mixed pools: one task file holding tasks of several environments.

Each ``Task`` names its environment (``task.env``), and everything downstream is per task: the
harness builds ``make_env(task.env)`` for each episode, grading reads the episode's own verdict,
and ``read_tasks`` / ``write_tasks`` store any task. So a mixed pool is just the generators'
outputs merged, split by split:

    report = mixed_pool({"sql": 60, "travel": 60}, seed=0)
    write_tasks("pool.jsonl", report.tasks)
"""

from __future__ import annotations

from collections import Counter
from itertools import zip_longest

from trajforge.schema import Task
from trajforge.tasks import synthesize
from trajforge.tasks.pool import SynthReport
from trajforge.tasks.templates import SPLIT_ORDER


def mixed_pool(specs: dict[str, int], seed: int = 0) -> SynthReport:
    """``specs[env]`` verified tasks per environment, merged into one pool.

    Within each split the environments are interleaved task by task, so any prefix of a split
    (a quick eval on the first 20 held-out tasks) still covers every environment. Drop counts are
    kept per environment as ``"env:reason"``.
    """
    if not specs:
        raise ValueError("mixed_pool needs at least one environment, e.g. {'sql': 40, 'travel': 40}")
    reports = {env: synthesize(env, n, seed) for env, n in specs.items()}
    tasks: list[Task] = []
    for split in SPLIT_ORDER:
        per_env = [[t for t in r.tasks if t.split == split] for r in reports.values()]
        tasks += [t for group in zip_longest(*per_env) for t in group if t is not None]
    clashes = [i for i, n in Counter(t.id for t in tasks).items() if n > 1]
    if clashes:
        raise ValueError(f"task ids shared between environments: {sorted(clashes)[:5]}")
    dropped = {f"{env}:{reason}": n for env, r in reports.items() for reason, n in r.dropped.items()}
    return SynthReport(tasks=tasks, dropped=dropped)


__all__ = ["mixed_pool"]
