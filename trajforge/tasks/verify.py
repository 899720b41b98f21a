"""Turn a proposed reference plan into a verified Task, or say precisely why not.

The contract every synthesized task meets (LLM proposals, bring-your-own questions):

1. every call is valid against the environment's tool schema (``parse.validate``, the same check
   the harness applies to a model's calls; safe coercions such as ``"3"`` → 3 are kept);
2. the plan calls the environment's final tool exactly once, as its last call;
3. executed in a fresh environment, no call fails and none faults;
4. the expected value is read off that execution (``Environment.expected_outcome``) — never taken
   from whoever proposed the plan;
5. replayed in another fresh environment against that expected value, ``verify()`` accepts.

Failures raise ``PlanRejected(reason, detail)``; the reason is the counter a report shows. An
environment that crashes while a candidate is checked (in ``reset``, ``expected_outcome`` or
``verify``, e.g. because it cannot take the expected value it produced) rejects that candidate as
``env_fault`` instead of ending the whole synthesis run: the same rule the harness applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from trajforge.envs import ToolError, Verdict, env_class, env_spec, env_toolset, make_env
from trajforge.parse.validate import validate_call
from trajforge.schema import Task, ToolCall


class PlanRejected(Exception):
    """A candidate plan failed one check of the contract."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class PlanRun(NamedTuple):
    """A plan executed once: its validated calls, their outputs and the expected value it defines."""

    calls: tuple[ToolCall, ...]
    results: tuple[str, ...]
    expected: Any


def check_calls(env: str, plan: Sequence[Any]) -> tuple[ToolCall, ...]:
    """Validate raw plan steps (``{"name", "arguments"}``) against ``env``'s tool schema."""
    cls = env_class(env)
    toolset = env_toolset(env)
    calls: list[ToolCall] = []
    for i, step in enumerate(plan, start=1):
        name = step.get("name") if isinstance(step, dict) else None
        arguments = step.get("arguments") if isinstance(step, dict) else None
        call, error, _ = validate_call(name, arguments, toolset)
        if error is not None:
            raise PlanRejected("invalid_call", f"step {i}: {error.kind}: {error.message}")
        calls.append(call)
    final = cls.final_tool
    if final is not None:
        if not calls or calls[-1].name != final:
            last = calls[-1].name if calls else "nothing"
            raise PlanRejected("no_final_call", f"the plan ends with {last}, not {final}")
        if any(c.name == final for c in calls[:-1]):
            raise PlanRejected("no_final_call", f"{final} is called before the last step, so the "
                               "episode would end early")
    return tuple(calls)


def run_plan(task: Task, calls: Sequence[ToolCall]) -> PlanRun:
    """Execute ``calls`` for ``task`` in a fresh environment; read the expected value off it."""
    try:
        return _run_plan(task, calls)
    except PlanRejected:
        raise
    except Exception as e:  # noqa: BLE001 - an environment crash rejects this candidate only
        raise PlanRejected("env_fault", f"the environment crashed running the plan: "
                           f"{type(e).__name__}: {e}") from None


def _run_plan(task: Task, calls: Sequence[ToolCall]) -> PlanRun:
    env = make_env(task.env, seed=task.seed)
    try:
        env.reset(task)
        results = []
        for i, call in enumerate(calls, start=1):
            result = env.execute(call)
            if result.fault:
                raise PlanRejected("env_fault", f"step {i} ({call.name}): {result.content}")
            if not result.ok:
                raise PlanRejected("tool_error", f"step {i} ({call.name}): {result.content}")
            results.append(result.content)
        try:
            expected = env.expected_outcome()
        except ToolError as e:
            raise PlanRejected(e.kind, str(e)) from None
    finally:
        env.close()
    return PlanRun(tuple(calls), tuple(results), expected)


def replay_accepts(task: Task) -> tuple[bool, str]:
    """Run ``task.reference`` in a fresh environment; (verify() accepted, its detail)."""
    try:
        return _replay(task)
    except Exception as e:  # noqa: BLE001 - an environment crash rejects this candidate only
        raise PlanRejected("env_fault", f"the environment crashed replaying the plan against its "
                           f"expected value: {type(e).__name__}: {e}") from None


def _replay(task: Task) -> tuple[bool, str]:
    verdict = replay_reference(task)
    return verdict.correct, verdict.detail


def replay_reference(task: Task) -> Verdict:
    """Run ``task.reference`` in a fresh environment of its kind; the verifier's verdict (a failed
    reference call gives an unsubmitted verdict naming it). Every task generator checks with this."""
    env = make_env(task.env, seed=task.seed)
    try:
        env.reset(task)
        for call in task.reference:
            result = env.execute(call)
            if not result.ok:
                return Verdict(milestones=list(env.milestones),
                               detail=f"reference call {call.name} failed: {result.content}")
        return env.verify()
    finally:
        env.close()


def verified(task: Task, calls: Sequence[ToolCall]) -> tuple[Task, PlanRun]:
    """``task`` with ``calls`` as its reference and the executed expected value, checked by replay.

    ``task.expected`` is ignored (it is what is being established); raises ``PlanRejected``.
    """
    run = run_plan(task, calls)
    done = task.model_copy(update={"reference": run.calls, "expected": run.expected})
    ok, detail = replay_accepts(done)
    if not ok:
        raise PlanRejected("verify_failed", detail)
    return with_words(stamp_toolset(done)), run


def stamp_toolset(task: Task) -> Task:
    """``task`` with the fingerprint of the toolset it is made for: its environment's current one
    (what its reference was just validated and executed against) unless it already has one."""
    if task.toolset_fingerprint is not None:
        return task
    return task.model_copy(update={"toolset_fingerprint": env_toolset(task.env).fingerprint})


def with_words(task: Task) -> Task:
    """``task`` with the expert's sentence before each reference call, where its generator wrote
    none: the environment's ``EnvSpec.reasoning`` when it has one (else the expert says what the
    call does)."""
    if task.reasoning or not task.reference:
        return task
    words = env_spec(task.env).reasoning
    if words is None:
        return task
    return task.model_copy(update={"reasoning": tuple(words(task, i) for i in range(len(task.reference)))})


__all__ = ["PlanRejected", "PlanRun", "check_calls", "replay_accepts", "replay_reference", "run_plan", "stamp_toolset",
           "verified", "with_words"]
