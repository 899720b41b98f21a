"""What an exception inside one episode becomes: a recorded end of that episode, never of the run.

A collection runs thousands of episodes of a model that writes anything, so every stage of an
episode that can raise is guarded, and the exception is classified by *who produced what raised*:

- **Infrastructure** — the policy (a model server, a local model: ``policy_error``, also for a
  ``Generation`` of the wrong shape) and the environment (``env_start``, ``tool_crash`` for an
  exception escaping ``Environment.execute``, ``env_verify``, ``env_snapshot``, ``env_restore``):
  the episode ends ``env_fault`` with a ``Fault`` naming the stage. Such episodes are never
  training negatives, are left out of the rates, and ``--retry-faults`` runs them again.
- **The model** — what the model wrote, once it is in the harness. A parse that raises is a
  ``malformed`` call error the model sees (the parser's own backstop, applied again here), and the
  turn goes on. Any other exception while the harness handles a turn (building the step,
  recording results) ends the episode ``harness_error``: graded ``failed`` with that fail reason,
  so no reply can make its failure vanish as a fault, and counted by name, so the bug shows. A
  server that refuses a prompt past the model's context once the model has taken a turn
  (``ContextExceeded``) ends the episode ``context_exceeded``, also ``failed``: the model's own
  replies and the results it asked for made the conversation that long.

Whatever is stored must also read back: the store degrades a record it cannot write as it is
(``trajforge.store.lines``) and notes why in a ``record_degraded`` fault; grading that raises
gives ``failed``/``grade_error`` with a ``grade_error`` note. Notes (``NOTES``) end nothing, so
grading never takes one for the fault that ended an episode.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import TypeAdapter, ValidationError

from trajforge.parse.limits import as_text
from trajforge.policies.base import Generation
from trajforge.schema import Fault

HARNESS_ERROR = "harness_error"
"""End and fail reason of an episode whose turn raised inside the harness (the model's side)."""

RECORD_DEGRADED = "record_degraded"
"""Fault note on a record the store could not write as it was (what was changed is its message)."""

CONTEXT_EXCEEDED = "context_exceeded"
"""End and fail reason of an episode whose conversation outgrew the model's context (the model's side)."""

GRADE_ERROR = "grade_error"
"""Fail reason (and fault note) of an episode whose grading raised."""

NOTES = frozenset({RECORD_DEGRADED, GRADE_ERROR})
"""Fault kinds that record something about a record and ended nothing."""

_MESSAGE_CHARS = 500
_TOKEN_ID_LIMIT = 2 ** 63
_IDS = TypeAdapter(list[int] | None)
_LOGPROBS = TypeAdapter(list[float] | None)


def describe(error: BaseException) -> str:
    """``Type: message`` of an exception, as short storable text (its message may hold anything a
    model wrote, or fail to render at all)."""
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises still has a type
        text = ""
    text = as_text(text[: _MESSAGE_CHARS * 2])
    name = type(error).__name__
    return (f"{name}: {text}" if text else name)[:_MESSAGE_CHARS]


def fault(kind: str, error: BaseException | str, step: int | None = None, attempt: int = 0,
          elapsed_s: float = 0.0, retried: bool = False) -> Fault:
    """A ``Fault`` of ``kind`` for ``error`` (an exception or a message)."""
    message = describe(error) if isinstance(error, BaseException) else as_text(error)[:_MESSAGE_CHARS]
    return Fault(kind=kind, message=message, attempt=attempt, elapsed_s=round(elapsed_s, 4), step=step,
                 retried=retried)


class BadGeneration(TypeError):
    """A policy returned something that is not a usable ``Generation`` (infrastructure)."""


def _field(adapter: TypeAdapter, value: Any, what: str) -> Any:
    """``value`` as the step's field of that type would read it; BadGeneration if it cannot."""
    try:
        return adapter.validate_python(value)
    except ValidationError:
        raise BadGeneration(f"{what} is not what a step stores (got a {type(value).__name__})") from None


def checked(gen: Any) -> Generation:
    """``gen`` if it is a ``Generation`` whose backend fields the step and the store can hold;
    else ``BadGeneration``. The text and the native calls are the model's and any value goes (the
    parser reads them); token ids (integers in [0, 2**63)), log-probs (finite numbers) and the
    finish reason (a string) are the backend's."""
    if not isinstance(gen, Generation):
        raise BadGeneration(f"the policy returned a {type(gen).__name__}, not a Generation")
    for ids, what in ((gen.prompt_ids, "prompt_ids"), (gen.completion_ids, "completion_ids")):
        ids = _field(_IDS, ids, what)
        if ids and not all(0 <= i < _TOKEN_ID_LIMIT for i in ids):
            raise BadGeneration(f"{what} holds a token id outside [0, 2**63)")
    logprobs = _field(_LOGPROBS, gen.completion_logprobs, "completion_logprobs")
    if logprobs and not all(math.isfinite(x) for x in logprobs):
        raise BadGeneration("completion_logprobs holds a number that is not finite")
    if gen.finish_reason is not None and type(gen.finish_reason) is not str:
        raise BadGeneration(f"finish_reason must be a string, got {type(gen.finish_reason).__name__}")
    return gen


def act_each(policy: Any, requests: list) -> list[Generation | Exception]:
    """The policy's turn for each request, or the exception that stands for it.

    A batch that raises (or answers with the wrong number of generations) is asked again one
    request at a time: one episode's prompt can be what broke the batch (a tokenizer limit, a
    server refusing one conversation), and then only that episode should end."""
    try:
        gens = list(policy.act(requests))
        if len(gens) != len(requests):
            raise BadGeneration(f"the policy returned {len(gens)} generations for {len(requests)} requests")
    except Exception as e:  # noqa: BLE001 - classified by the caller: policy_error
        if len(requests) == 1:
            return [e]
        return [act_each(policy, [req])[0] for req in requests]
    out: list[Generation | Exception] = []
    for gen in gens:
        try:
            out.append(checked(gen))
        except BadGeneration as e:
            out.append(e)
    return out
