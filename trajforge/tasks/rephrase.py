"""Train copies of tasks in other wordings: the same plan and answer, the question said differently.

    more = rephrased(report.tasks, copies=1)   # one reworded copy of each train task that has one

A model trained on one wording per template keys its query on the wording's first words, not on
the words that decide it (``envs/sql/rephrasings.py`` has the case). Each environment says how its
questions can be reworded (``EnvSpec.rephrase(task, k)``); this module makes the copies, the same
way for every environment:

- only train tasks are copied: test and held-out keep the one wording they are measured in;
- copy ``j`` of a task takes wording ``(rotation + j)``, the rotation derived from the task id,
  so a template's tasks spread over its wordings and the same pool gives the same copies anywhere;
- a copy keeps the task's reference, expected answer, reasoning, entities and world (the plan
  was verified for the meaning, which the wording does not change) and gets its own stable id,
  so stores and dedup tell the copies apart.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from trajforge.schema import Task
from trajforge.tasks.templates import stable_id


def rephrased(tasks: Sequence[Task], copies: int = 1) -> list[Task]:
    """Up to ``copies`` reworded copies of each train task whose environment and template have
    other wordings (the originals are not included)."""
    if copies < 0:
        raise ValueError(f"copies must be 0 or more, not {copies}")
    from trajforge.envs import env_spec

    out: list[Task] = []
    if not copies:
        return out
    for task in tasks:
        if task.split != "train":
            continue
        rephrase = env_spec(task.env).rephrase
        if rephrase is None:
            continue
        start = int(hashlib.sha1(task.id.encode()).hexdigest()[:8], 16)
        seen = {task.prompt}
        for j in range(copies):
            prompt = rephrase(task, start + j)
            if prompt is None or prompt in seen:  # no wordings, or fewer than ``copies`` of them
                break
            seen.add(prompt)
            out.append(task.model_copy(update={
                "id": stable_id(task.env, task.template, [task.id, "rephrased", j]), "prompt": prompt}))
    return out


def with_rephrasings(tasks: Sequence[Task], copies: int) -> list[Task]:
    """``tasks`` with the reworded copies of their train tasks right after those, so a pool stays
    grouped by split (train, test, heldout)."""
    train = [t for t in tasks if t.split == "train"]
    return train + rephrased(train, copies) + [t for t in tasks if t.split != "train"]


__all__ = ["rephrased", "with_rephrasings"]
