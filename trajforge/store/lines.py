"""One stored line ⇄ one trajectory: what a reader accepts, and the line a writer appends.

    line = write_line(traj)       # always a line that read_line reads back
    traj = read_line(line)        # ValueError / RecursionError for a line that cannot be read

A record must reach the store even when it cannot be written as it is — an episode lost at the
append is an episode lost for good, and a resumed collection would meet the same reply again. So
``write_line`` dumps the record, reads the line back exactly as a reader will, and only when that
fails (lone surrogates in a tool's output, a verdict answer that is not JSON, a number JSON cannot
hold, a NaN that would come back as ``null``, nesting too deep) writes a degraded copy:

1. every value made storable — strings with lone surrogates repaired to U+FFFD, bytes decoded,
   non-finite floats, integers past the int-string limit, non-JSON objects and values nested
   deeper than ``MAX_DEPTH`` replaced by None — then every field that still does not validate
   removed, so it takes its default (``steps.0.gen_s`` → 0.0, ``verdict.answer`` → None);
2. should that still not read back, the record's identity and grade alone (its idempotency key,
   ``end``, ``outcome``), without the conversation.

Either way the copy carries a ``record_degraded`` fault whose message says what was changed and
why; its idempotency key is the original's, so a resume counts the episode as done.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from trajforge.harness.faults import RECORD_DEGRADED, describe, fault
from trajforge.parse.limits import INT_BITS, as_text, clean_text
from trajforge.schema import STORED, Outcome, Trajectory

MAX_DEPTH = 100
"""Deepest value kept in a degraded record, counted from the record itself (a trajectory's own
structure is under ten levels; call arguments are already capped at 64 by the parser)."""

_DROP_ROUNDS = 8
"""Rounds of removing fields that do not validate before falling back to the identity record."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_UNREADABLE = (ValueError, TypeError, RecursionError)
"""What dumping or reading a record raises when it cannot be stored (pydantic's serialization
and validation errors are ValueErrors)."""


def _loads(line: str) -> dict:
    """One line's JSON; a lone UTF-16 surrogate escape (which no encoder or tokenizer takes, so
    exporting or training on it would fail later) makes it unreadable, a ValueError, like a torn line.
    Only a line with a surrogate escape at all pays for the check."""
    value = json.loads(line)
    if _SURROGATE_ESCAPE.search(line):
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # UnicodeEncodeError on a lone surrogate
    return value


def read_line(line: str) -> Trajectory:
    """The trajectory one stored line holds (upgraded from an older format); ValueError or
    RecursionError when it cannot be read, ``NewerFormatError`` when it is too new."""
    return Trajectory.model_validate(_loads(line), context=STORED)


def write_line(traj: Trajectory) -> str:
    """The line (with its newline) to append for ``traj``: as it is when it reads back, else a
    degraded copy that does (module docstring)."""
    try:
        line = traj.model_dump_json(exclude_none=True)
        read_line(line)
        return line + "\n"
    except _UNREADABLE as e:
        problem = describe(e)
    changes = _Changes()
    data = _storable(traj, 0, changes, "")
    for _ in range(_DROP_ROUNDS):
        try:
            copy = Trajectory.model_validate(data)
        except ValidationError as e:
            if _drop_invalid(data, e, changes):
                continue
            break
        try:
            line = _noted(copy, problem, changes).model_dump_json(exclude_none=True)
            read_line(line)
            return line + "\n"
        except _UNREADABLE:
            break
    changes.dropped.append("the conversation (messages, steps, verdict)")
    return _noted(_identity(traj), problem, changes).model_dump_json(exclude_none=True) + "\n"


class _Changes:
    """What the degraded copy changed, for its note."""

    def __init__(self) -> None:
        self.strings = 0
        self.dropped: list[str] = []

    def summary(self) -> str:
        parts = [f"{self.strings} strings repaired"] if self.strings else []
        if self.dropped:
            shown = ", ".join(self.dropped[:10]) + (f" and {len(self.dropped) - 10} more" if len(self.dropped) > 10 else "")
            parts.append(f"removed {shown}")
        return "; ".join(parts) or "no change"


def _noted(traj: Trajectory, problem: str, changes: _Changes) -> Trajectory:
    note = fault(RECORD_DEGRADED, f"stored degraded ({changes.summary()}): {problem}")
    return traj.model_copy(update={"faults": [*traj.faults, note]})


def _storable(value: Any, depth: int, changes: _Changes, path: str) -> Any:
    """``value`` (a model, or data) as plain data JSON can hold and read back."""
    t = type(value)
    if t is str:
        clean = clean_text(value)
        changes.strings += clean is not value
        return clean
    if value is None or t is bool:
        return value
    if t is int:
        return value if value.bit_length() <= INT_BITS else _dropped(changes, path, "an integer too long for JSON")
    if t is float:
        return value if math.isfinite(value) else _dropped(changes, path, "a number that is not finite")
    if isinstance(value, (bytes, bytearray)):
        changes.strings += 1
        return as_text(value)
    if depth >= MAX_DEPTH:
        return _dropped(changes, path, f"nesting deeper than {MAX_DEPTH}")
    if isinstance(value, BaseModel):
        return {name: _storable(getattr(value, name), depth + 1, changes, f"{path}.{name}".lstrip("."))
                for name in type(value).model_fields}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_storable(v, depth + 1, changes, f"{path}.{i}") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k if type(k) is str and clean_text(k) is k else as_text(k): _storable(v, depth + 1, changes, f"{path}.{k}")
                for k, v in value.items()}
    return _dropped(changes, path, f"a {t.__name__}")


def _dropped(changes: _Changes, path: str, what: str) -> None:
    changes.dropped.append(f"{_clip(path or 'value')} ({what})")
    return None


def _clip(path: str) -> str:
    return path if len(path) <= 60 else path[:60] + "…"


def _drop_invalid(data: dict, error: ValidationError, changes: _Changes) -> bool:
    """Remove, for each validation error, the innermost object field on its path (so the field
    takes its default); False when nothing could be removed."""
    removed = False
    for err in error.errors():
        loc = list(err["loc"])
        while loc and not isinstance(loc[-1], str):
            loc.pop()  # up to the field holding the list item that failed
        if not loc:
            continue
        holder: Any = data
        try:
            for key in loc[:-1]:
                holder = holder[key]
        except (KeyError, IndexError, TypeError):
            continue
        if isinstance(holder, dict) and loc[-1] in holder:
            del holder[loc[-1]]
            path = _clip(".".join(map(str, loc)))
            if not any(d.startswith(path) for d in changes.dropped):  # not already named by _storable
                changes.dropped.append(f"{path} (invalid)")
            removed = True
    return removed


def _identity(traj: Trajectory) -> Trajectory:
    """The record's idempotency key, end and grade, with nothing of the conversation."""
    text = lambda s: as_text(s)[:500]  # noqa: E731
    outcome = traj.outcome
    if outcome is not None:
        outcome = Outcome(tier=outcome.tier, fail_reason=None if outcome.fail_reason is None else text(outcome.fail_reason))
    sample = traj.sample if type(traj.sample) is int and traj.sample.bit_length() < 63 else 0
    return Trajectory(task_id=text(traj.task_id), sample=sample, policy=text(traj.policy), env=text(traj.env),
                      toolset_fingerprint=text(traj.toolset_fingerprint), dialect=text(traj.dialect),
                      tier=text(traj.tier), split=text(traj.split), end=text(traj.end), outcome=outcome,
                      sampling=traj.sampling if _reads_back(traj.sampling) else None,
                      reference_turns=traj.reference_turns if 0 <= traj.reference_turns < 2**31 else 0)


def _reads_back(model: BaseModel | None) -> bool:
    if model is None:
        return True
    try:
        type(model).model_validate_json(model.model_dump_json())
        return True
    except _UNREADABLE:
        return False
