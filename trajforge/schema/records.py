"""Stored record shapes: format versions, upgrades on read, and each fact of a step written once.

Every stored record (a trajectory line in a store, a task line in a pool) carries ``format`` (the
record format, ``FORMAT`` for what this trajforge writes) and ``trajforge_version`` (who wrote
it). Reading:

- a record of an older format is upgraded in memory (``_trajectory_v1``), so old stores and pools
  keep working; one that cannot be read at all stays a validation error, which readers skip and
  report (``TrajectoryStore.torn``);
- a record of a newer format is refused with ``NewerFormatError``, which readers do not swallow:
  guessing at fields this version does not know would silently lose data.

Writing (``write_trajectory``, the JSON form of ``Trajectory``): an assistant message whose calls
and raw text are its step's, and a tool message that is one of its step's results or parse-error
feedback, are stored as references (``{"role": "assistant", "step": 2, "content": ...}``,
``{"role": "tool", "step": 2, "result": 0}``, ``{"role": "tool", "step": 2, "error": 0}``) and
expanded again on read. A message that differs from its step in any way is stored as it is, so the
round trip is exact for any conversation (harness, pipeline, imported, migrated).

Formats: 1 is everything before the field existed (verdict as a dict, outcome copying the
verdict's answer, correctness and milestones, fail reasons ``malformed_call`` / ``truncated_call``,
no step references); 2 adds typed verdicts, references, ``Step.native`` and the stamps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import (BaseModel, SerializationInfo, SerializerFunctionWrapHandler, ValidationInfo,
                      model_serializer, model_validator)

from trajforge._version import __version__

FORMAT = 2
"""The record format this trajforge writes and the newest it reads."""

STORED: dict[str, Any] = {"stored": True}
"""Validation context for records read from a file: ``Trajectory.model_validate_json(line,
context=STORED)``. It only decides what a record without a version stamp says (unknown, not this
version); upgrades and refusals happen either way."""

V1_FAIL_REASONS = {"malformed_call": "malformed", "truncated_call": "truncated"}
"""Format-1 fail reasons that renamed a parse error kind; format 2 uses the kind itself."""


class NewerFormatError(Exception):
    """A record written in a newer format than this trajforge reads.

    Not a ``ValueError`` on purpose: pydantic passes it through validation unchanged and readers
    that skip unreadable lines do not skip this one."""


def record_format(data: dict[str, Any], what: str) -> int:
    """The format of a stored record (1 when it has none); NewerFormatError past ``FORMAT``."""
    fmt = data.get("format", 1)
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < 1:
        raise ValueError(f"{what} has format {fmt!r}; expected an integer from 1 to {FORMAT}")
    if fmt > FORMAT:
        raise NewerFormatError(
            f"this {what} was written in record format {fmt} by trajforge "
            f"{data.get('trajforge_version') or '?'}, but trajforge {__version__} reads formats up "
            f"to {FORMAT}: upgrade trajforge to read it (pip install -U trajforge)")
    return fmt


class StoredRecord(BaseModel):
    """Base of the shapes stored one per line (``Task``, ``Trajectory``): reading goes through the
    class's ``reader`` (upgrades, refusals, expansion), the JSON form through its ``writer``. It
    has no fields, so each record keeps its own field order (readers rely on ``task_id`` first)."""

    reader: ClassVar[Callable[[dict[str, Any], bool], dict[str, Any]]]
    writer: ClassVar[Callable[[dict[str, Any]], dict[str, Any]]]

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any, info: ValidationInfo) -> Any:
        stored = bool(info.context and info.context.get("stored"))
        return cls.reader(data, stored) if isinstance(data, dict) else data

    @model_serializer(mode="wrap")
    def _write(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        data = handler(self)
        return type(self).writer(data) if info.mode_is_json() else data


def stamped(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` marked as written now, by this version, in the current format."""
    return {**data, "format": FORMAT, "trajforge_version": __version__}


def write_task(data: dict[str, Any]) -> dict[str, Any]:
    """The stored form of a dumped task: stamped, without ``world`` when it is 0 (the original
    world; a pool of it reads and writes exactly as before worlds existed)."""
    if data.get("world") == 0:
        data = {k: v for k, v in data.items() if k != "world"}
    return stamped(data)


def read_task(data: dict[str, Any], stored: bool) -> dict[str, Any]:
    """A task record as the current ``Task`` reads it (format 1 had no other differences)."""
    if record_format(data, "task") == 1 and stored:
        data = {**data, "trajforge_version": data.get("trajforge_version", "")}
    return data


# ---- trajectories -----------------------------------------------------------------------------

def read_trajectory(data: dict[str, Any], stored: bool) -> dict[str, Any]:
    """A trajectory record in the current format, references expanded.

    ``stored``: the data comes from a file (its missing version stamp then means "unknown", not
    "this version"); constructing a ``Trajectory`` in code passes False."""
    if record_format(data, "trajectory") == 1:
        data = _trajectory_v1(data, stored)
    return _expand(data)


def write_trajectory(data: dict[str, Any]) -> dict[str, Any]:
    """The stored form of a dumped trajectory: stamped, each fact of a step once."""
    return _compact(stamped(data))


def _trajectory_v1(data: dict[str, Any], stored: bool) -> dict[str, Any]:
    data = dict(data)
    if not data.get("verdict"):  # format 1 wrote {} for "no verdict"
        data["verdict"] = None
    outcome = data.get("outcome")
    if isinstance(outcome, dict):
        reason = outcome.get("fail_reason")
        data["outcome"] = {"tier": outcome.get("tier"), "fail_reason": V1_FAIL_REASONS.get(reason, reason),
                           "failed_role": outcome.get("failed_role")}
    steps, messages = data.get("steps"), data.get("messages")
    if isinstance(steps, list) and isinstance(messages, list):
        # An assistant message without raw text was rendered from its calls: a native turn.
        assistant = [m for m in messages if _get(m, "role") == "assistant"]
        if len(assistant) == len(steps):
            data["steps"] = [_with(s, native=True) if _get(m, "raw") is None and _get(s, "raw") else s
                             for s, m in zip(steps, assistant)]
    if stored:
        data.setdefault("trajforge_version", "")
    return data


_MESSAGE_DEFAULTS: dict[str, Any] = {"content": "", "tool_calls": [], "name": None, "tool_call_id": None,
                                     "raw": None, "role_name": None}


def _get(obj: Any, key: str) -> Any:
    """A field of a message or step given as a dict (possibly dumped without its None fields) or
    as a model."""
    if isinstance(obj, dict):
        return obj.get(key, _MESSAGE_DEFAULTS.get(key))
    return getattr(obj, key, _MESSAGE_DEFAULTS.get(key))


def _with(obj: Any, **update: Any) -> Any:
    return {**obj, **update} if isinstance(obj, dict) else obj.model_copy(update=update)


def _dumped(items: Any) -> list[Any]:
    return [i.model_dump(mode="json", exclude_none=True) if hasattr(i, "model_dump") else i for i in items or []]


def _expected_assistant(step: Any) -> dict[str, Any]:
    return {"tool_calls": _dumped(_get(step, "calls")),
            "raw": None if _get(step, "native") else _get(step, "raw"), "role_name": _get(step, "role_name")}


def _expected_result(step: Any, k: int) -> dict[str, Any] | None:
    results, calls = _get(step, "results") or [], _get(step, "calls") or []
    if k >= len(results) or k >= len(calls):
        return None
    call = calls[k]
    return {"content": _get(results[k], "content"), "name": _get(call, "name"),
            "tool_call_id": _get(call, "id"), "role_name": _get(step, "role_name")}


def _expected_feedback(step: Any, k: int) -> dict[str, Any] | None:
    errors = _get(step, "errors") or []
    if k >= len(errors):
        return None
    err = errors[k]
    return {"content": f"Error ({_get(err, 'kind')}): {_get(err, 'message')}",
            "name": _get(err, "tool") or "error", "tool_call_id": None, "role_name": _get(step, "role_name")}


def _matches(message: dict[str, Any], expected: dict[str, Any] | None, role: str) -> bool:
    if expected is None or set(message) - {"role", *_MESSAGE_DEFAULTS}:
        return False
    want = {**_MESSAGE_DEFAULTS, **expected, "role": role}
    if role == "assistant":
        want["content"] = _get(message, "content")
    return all(_get(message, k) == v for k, v in want.items() if k != "role") and message.get("role") == role


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    messages, steps = data.get("messages") or [], data.get("steps") or []
    if not steps or sum(1 for m in messages if m.get("role") == "assistant") != len(steps):
        return data  # not a turn-per-step conversation: stored as it is
    out: list[dict[str, Any]] = []
    turn, results, errors = -1, 0, 0
    for m in messages:
        if m.get("role") == "assistant":
            turn, results, errors = turn + 1, 0, 0
            if _matches(m, _expected_assistant(steps[turn]), "assistant"):
                out.append({"role": "assistant", "step": turn, **({"content": m["content"]} if m.get("content") else {})})
                continue
        elif m.get("role") == "tool" and turn >= 0:
            if _matches(m, _expected_result(steps[turn], results), "tool"):
                out.append({"role": "tool", "step": turn, "result": results})
                results += 1
                continue
            if _matches(m, _expected_feedback(steps[turn], errors), "tool"):
                out.append({"role": "tool", "step": turn, "error": errors})
                errors += 1
                continue
        out.append(m)
    return {**data, "messages": out}


def _expand(data: dict[str, Any]) -> dict[str, Any]:
    messages = data.get("messages")
    if not isinstance(messages, list) or not any(isinstance(m, dict) and "step" in m for m in messages):
        return data
    steps = data.get("steps") or []
    out = []
    for i, m in enumerate(messages):
        if not (isinstance(m, dict) and "step" in m):
            out.append(m)
            continue
        turn = m["step"]
        if not isinstance(turn, int) or not 0 <= turn < len(steps):
            raise ValueError(f"messages[{i}] refers to step {turn!r}; the record has {len(steps)} steps")
        step = steps[turn]
        if m.get("role") == "assistant":
            expected = _expected_assistant(step)
            out.append({"role": "assistant", "content": m.get("content", ""), **expected})
            continue
        key = "result" if "result" in m else "error"
        expected = (_expected_result if key == "result" else _expected_feedback)(step, m.get(key, -1))
        if expected is None:
            raise ValueError(f"messages[{i}] refers to {key} {m.get(key)!r} of step {turn}, which it lacks")
        out.append({"role": "tool", **expected})
    return {**data, "messages": out}
