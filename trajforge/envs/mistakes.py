"""Helpers for the environments' realistic mistakes (``EnvSpec.mistakes``).

A self-repair demonstration (``trajforge.tasks.repair``) plays a mistake, lets the environment
answer it for real, then continues with the reference. Every mistake an environment offers must
leave the rest of the reference valid: either its call fails (nothing changes) or it only reads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from trajforge.schema import Mistake, Task, ToolCall


def task_hash(task_id: str) -> int:
    """A stable number per task, for choices that should vary across a pool but never between
    runs: which mistake a task plays first (``tasks.repair``), which argument it misspells."""
    return int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16)


def first_call(task: Task, names: Sequence[str]) -> int | None:
    """Index of the first reference call of one of ``names`` (None when there is none)."""
    return next((i for i, c in enumerate(task.reference) if c.name in names), None)


def with_args(call: ToolCall, **update) -> ToolCall:
    """``call`` with some arguments replaced (its id dropped: the harness gives ids)."""
    return ToolCall(name=call.name, arguments={**call.arguments, **update})


def substituted(value, old: str, new: str):
    """``value`` (an argument: text, or lists and dicts of text) with ``old`` replaced by ``new``."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [substituted(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: substituted(v, old, new) for k, v in value.items()}
    return value


def nearest_template(task: Task, pool: Sequence[Task], tools: Sequence[str], recovery: str) -> Mistake | None:
    """Another template's first read-only call (one of ``tools``) filled with this task's entities:
    the query a model that memorised templates would copy. The other task must share this task's
    entity kinds (its values are replaced by this task's); the nearest is the one sharing most."""
    at = first_call(task, tools)
    if at is None:
        return None
    own = task.reference[at]
    best: tuple[int, str, ToolCall] | None = None
    for other in pool:
        if other.template == task.template or other.env != task.env:
            continue
        shared = [k for k in other.entities if k in task.entities and isinstance(other.entities[k], str)
                  and isinstance(task.entities[k], str)]
        if not shared or any(k not in task.entities for k in other.entities if isinstance(other.entities[k], str)):
            continue
        j = first_call(other, tools)
        if j is None:
            continue
        args = other.reference[j].arguments
        for k in sorted(shared, key=lambda k: -len(other.entities[k])):  # longest first: no partial overlaps
            args = substituted(args, other.entities[k], task.entities[k])
        call = ToolCall(name=other.reference[j].name, arguments=args)
        if call.name == own.name and call.arguments == own.arguments:
            continue
        key = (len(shared), other.id, call)
        if best is None or key[:2] > best[:2]:
            best = key
    if best is None:
        return None
    return Mistake(kind="nearest_template", at=at, calls=(best[2],), recovery=recovery)
