"""The episode loop: render → generate → parse → validate → execute → feed back, batched.

All episodes waiting for a turn are handed to the policy together (the hf policy generates them as
one padded batch), then each episode's text is parsed and its valid calls are executed in its own
environment. Errors go back to the model as tool messages it can recover from; an episode ends on
the environment's final tool, after ``max_turns``, after ``max_consecutive_errors`` turns in a row
with no valid call, after ``max_repeats`` turns in a row that repeat the turn before them exactly
(the same calls, the same results: a greedy model that starts looping never stops by itself), or
on an infrastructure fault. An exception inside one episode (its
environment, the policy's answer for it, the handling of its turn) ends that episode with a
recorded reason and never the run (``trajforge.harness.faults`` says which reason when).

Run it through ``run_episodes`` (library) or ``trajforge collect`` / ``trajforge eval`` (CLI).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Iterable

from pydantic import BaseModel, Field

from trajforge.envs import Environment, env_class, make_env
from trajforge.envs.toolsets import KNOWN, class_toolset
from trajforge.harness.budget import turn_budget
from trajforge.harness.demos import episode_demos
from trajforge.harness.faults import CONTEXT_EXCEEDED, HARNESS_ERROR, act_each, fault
from trajforge.parse.base import ParseResult, backstop
from trajforge.parse.limits import as_text
from trajforge.parse.openai import parse_tool_calls
from trajforge.policies.base import ContextExceeded, Generation, Policy, TurnRequest
from trajforge.schema import (Fault, Message, Step, Task, ToolCall, ToolResult, Toolset, Trajectory,
                              Verdict)


class HarnessConfig(BaseModel):
    """How episodes are run."""

    max_turns: int | None = Field(None, ge=1)
    """Assistant turns per episode before it ends with ``max_turns``; None: each task's own budget
    (twice its reference plus slack, else its environment's default; ``harness.budget``)."""
    max_consecutive_errors: int = Field(3, ge=1)
    """Turns in a row without any valid call before the episode ends."""
    max_repeats: int = Field(2, ge=1)
    """Turns in a row that repeat the turn before them (the same calls with the same arguments,
    the same results) before the episode ends with ``repeated``. Nothing changed between them, so
    the next prompt differs only by one more copy; a greedy model then loops to ``max_turns``."""
    instructions: str | None = None
    """System instructions above the dialect's tool block; None uses the environment's own. They
    are part of the toolset the model sees, so another text is another toolset fingerprint."""
    demos: int | None = None
    """Most similar solved training tasks shown above each episode's first user message
    (``harness/demos.py``); None: as many as the policy's adapter was trained with (else none), 0: none."""
    demo_pool: str | None = None
    """Where they are retrieved from: a demonstration pool file or an adapter folder holding one
    (the CLI also takes a store: its train split); None: the pool the policy's adapter recorded."""


def episode_rules(cfg: HarnessConfig) -> dict[str, Any]:
    """The settings that shape an episode, as JSON. A store's resume key (task, policy, sampling,
    sample) does not hold them, so a store records them to refuse a rerun under other ones
    (``trajforge collect``, RFT's samples)."""
    return cfg.model_dump(mode="json", include={"max_turns", "max_consecutive_errors", "max_repeats",
                                                "instructions", "demos", "demo_pool"})


def shown_toolset(env: Any, cfg: HarnessConfig) -> Toolset:
    """The toolset an episode shows the model: the environment's (built once per class; a handle
    or a pipeline role's view gives its own), under ``cfg.instructions`` when set."""
    base = class_toolset(type(env)) if isinstance(env, Environment) else env.toolset()
    if cfg.instructions is None:
        return base
    return KNOWN.canonical(base.with_instructions(cfg.instructions))


def repeats(step: Step, before: Step) -> bool:
    """Whether ``step`` made exactly the valid calls of the turn ``before`` it and got exactly its
    results (ids aside: a model may number its calls)."""
    if not step.calls or len(step.calls) != len(before.calls) or len(step.results) != len(before.results):
        return False
    same_calls = all(a.name == b.name and a.arguments == b.arguments for a, b in zip(step.calls, before.calls))
    return same_calls and all(a.content == b.content and a.ok == b.ok for a, b in zip(step.results, before.results))


def first_message(task: Task, observation: str) -> str:
    """The user turn: the task's request, then what the environment showed at ``reset``."""
    observation = as_text(observation)  # what reset returned goes into every prompt and the record
    return f"{task.prompt}\n\n{observation}" if observation else task.prompt


class Episode:
    """Mutable state of one running episode.

    ``observation``: what ``env.reset(task)`` returned; the model sees it below the prompt, and
    retrieved demonstrations (``cfg.demos``, or the policy's adapter's) above it."""

    def __init__(self, task: Task, sample: int, env: Environment, policy: Policy, cfg: HarnessConfig,
                 observation: str = ""):
        self.task, self.sample, self.env = task, sample, env
        self.toolset = shown_toolset(env, cfg)
        opening = first_message(task, observation)
        demos = episode_demos(cfg, policy)
        if demos is not None:
            opening = demos.show(opening, task.id, self.toolset.names)
        self.messages = [Message(role="system", content=self.toolset.instructions),
                         Message(role="user", content=opening)]
        self.steps: list[Step] = []
        self.errors_in_row = 0
        self.repeats_in_row = 0
        self.end = ""
        self.started = time.perf_counter()
        self.policy = policy
        self.faults: list[Fault] = []
        """Faults met in this episode (the async harness adds its request and deadline faults)."""

    def request(self) -> TurnRequest:
        return TurnRequest(self.task, self.messages, self.toolset, len(self.steps), sample=self.sample)

    def advance(self, gen: Generation, gen_s: float, cfg: HarnessConfig) -> None:
        """Parse one generation, execute its valid calls, append messages; maybe end."""
        step, parsed = self.respond(gen, gen_s)
        t0 = time.perf_counter()
        for call in parsed.calls:
            try:
                result = execute_call(self.env, call)
            except Exception as e:  # noqa: BLE001 - execute promises not to raise; one that does is the env's fault
                self.faults.append(fault("tool_crash", e, step=len(self.steps)))
                result = ToolResult(name=call.name, content=f"Error: tool crashed ({type(e).__name__})",
                                    ok=False, error="env_fault", fault=True)
            if self.record(step, call, result, self.env.done):
                break
        self.close_step(step, parsed, time.perf_counter() - t0, cfg)

    def take_turn(self, gen: Generation | Exception, gen_s: float, cfg: HarnessConfig) -> None:
        """``advance``, guarded: a policy that failed for this episode (``gen`` is the exception)
        ends it as ``env_fault``, unless the conversation outgrew the model's context
        (``context_exceeded``); an exception while handling the turn ends it as
        ``harness_error`` (see ``trajforge.harness.faults``)."""
        if isinstance(gen, ContextExceeded):  # the model's own turns made the prompt that long
            self.end = CONTEXT_EXCEEDED
            return
        if isinstance(gen, Exception):
            self.fail("policy_error", gen)
            return
        try:
            self.advance(gen, gen_s, cfg)
        except Exception as e:  # noqa: BLE001 - one turn's bug ends its episode, never the run
            self.fail(HARNESS_ERROR, e, end=HARNESS_ERROR)

    def fail(self, kind: str, error: BaseException, end: str = "env_fault") -> None:
        """End the episode where it stands because ``error`` was raised, recording why."""
        self.faults.append(fault(kind, error, step=len(self.steps)))
        self.end = end

    # The pieces of ``advance``, for harnesses that execute calls elsewhere (async, Ray actors).

    def respond(self, gen: Generation, gen_s: float) -> tuple[Step, ParseResult]:
        """Parse one generation into a new step and append the assistant message.

        The text is stored as clean text whatever the policy handed over (bytes, None, lone
        surrogates: ``limits.as_text``), so the record can always be written."""
        text = gen.text if type(gen.text) is str and gen.text.isascii() else as_text(gen.text)
        native = gen.native_calls is not None
        try:
            if native:
                parsed = parse_tool_calls(gen.native_calls, gen.text, self.toolset, gen.finish_reason)
            else:
                parsed = self.policy.dialect.parse(text, self.toolset)
        except Exception as e:  # noqa: BLE001 - parsing is total; should a dialect still raise, it is the model's malformed call
            parsed = backstop(e)
        step = Step(index=len(self.steps), raw=text, calls=parsed.calls, errors=parsed.errors,
                    repairs=parsed.repairs, prompt_ids=gen.prompt_ids,
                    completion_ids=gen.completion_ids, gen_s=gen_s,
                    completion_logprobs=gen.completion_logprobs, native=native,
                    mistake=getattr(gen, "mistake", None))
        self.messages.append(Message(role="assistant", content=parsed.text, tool_calls=parsed.calls,
                                     raw=None if native else text))
        return step, parsed

    def record(self, step: Step, call: ToolCall, result: ToolResult, env_done: bool) -> bool:
        """Feed one executed call's result back; True when it ended the episode (the remaining
        calls of the turn are then not executed). Its text is made clean text first: it goes
        into the next prompt and the record, and a lone surrogate would break both."""
        content = as_text(result.content)
        if content is not result.content:
            result = result.model_copy(update={"content": content})
        step.results.append(result)
        self.messages.append(Message(role="tool", name=call.name, content=result.content,
                                     tool_call_id=call.id))
        if result.fault:
            self.end = "env_fault"
        elif env_done:
            self.end = "submitted"
        return bool(self.end)

    def close_step(self, step: Step, parsed: ParseResult, tool_s: float, cfg: HarnessConfig) -> None:
        """Feed parse errors back, store the step, and end the episode on too many errors/turns."""
        for err in parsed.errors:
            self.messages.append(Message(role="tool", name=err.tool or "error", content=err.feedback))
        step.tool_s = tool_s
        self.repeats_in_row = self.repeats_in_row + 1 if self.steps and repeats(step, self.steps[-1]) else 0
        self.steps.append(step)
        self.errors_in_row = 0 if parsed.calls else self.errors_in_row + 1
        if not self.end and self.errors_in_row >= cfg.max_consecutive_errors:
            self.end = "max_errors"
        if not self.end and self.repeats_in_row >= cfg.max_repeats:
            self.end = "repeated"
        if not self.end and len(self.steps) >= turn_budget(self.task, cfg.max_turns):
            self.end = "max_turns"

    def finish(self) -> Trajectory:
        """Verify, close the environment, and give the record (an environment that fails to verify
        ends the episode as ``env_fault``)."""
        verdict = conclude(self.env)
        if isinstance(verdict, Exception):
            self.fail("env_verify", verdict)
            verdict = None
        return self.trajectory(verdict)

    def trajectory(self, verdict: Verdict | None) -> Trajectory:
        """The record of this episode as it stands, with the environment's verdict."""
        return Trajectory(
            task_id=self.task.id, sample=self.sample, policy=self.policy.name, env=self.task.env,
            toolset_fingerprint=self.toolset.fingerprint, dialect=self.policy.dialect.name,
            tier=self.task.tier, split=self.task.split, messages=self.messages, steps=self.steps,
            verdict=verdict, end=self.end, reference_turns=len(self.task.reference),
            wall_s=time.perf_counter() - self.started, faults=list(self.faults),
        )


def execute_call(env: Any, call: ToolCall) -> ToolResult:
    """``env.execute(call)``, which must be a ``ToolResult``: anything else is the environment's
    bug, raised here as a TypeError so the harness records it as a ``tool_crash``."""
    result = env.execute(call)
    if not isinstance(result, ToolResult):
        raise TypeError(f"{type(env).__name__}.execute returned a {type(result).__name__}, not a ToolResult")
    return result


def conclude(env: Any) -> Verdict | Exception:
    """``env.verify()`` as a ``Verdict`` — or the exception it raised, or why what it returned is
    not one — then ``env.close()``, whose failure is ignored: the episode is complete by then."""
    try:
        verdict = env.verify()
        verdict = verdict if isinstance(verdict, Verdict) else Verdict.model_validate(verdict)
    except Exception as e:  # noqa: BLE001 - the caller records it (env_verify)
        verdict = e
    close_quietly(env)
    return verdict


def unstarted(task: Task, sample: int, policy: Policy, faults: list[Fault], wall_s: float) -> Trajectory:
    """The record of an episode whose environment never started (``env_fault``)."""
    return Trajectory(task_id=task.id, sample=sample, policy=policy.name, env=task.env, toolset_fingerprint="",
                      dialect=policy.dialect.name, tier=task.tier, split=task.split, end="env_fault",
                      reference_turns=len(task.reference), wall_s=wall_s, faults=faults)


def start(task: Task, sample: int, policy: Policy, cfg: HarnessConfig,
          episode: Callable[..., Episode] = Episode) -> Episode | Trajectory:
    """A started episode, or the ``env_fault`` record of one whose environment failed to start."""
    t0 = time.perf_counter()
    env = None
    try:
        env = make_env(task.env, seed=task.seed)
        return episode(task, sample, env, policy, cfg, observation=env.reset(task))
    except Exception as e:  # noqa: BLE001 - an environment that cannot start ends only its episode
        if env is not None:
            close_quietly(env)
        return unstarted(task, sample, policy, [fault("env_start", e)], time.perf_counter() - t0)


def close_quietly(env: Any) -> None:
    """``env.close()``, ignoring its failure: the episode's record is complete without it (or
    already says why it ended)."""
    try:
        env.close()
    except Exception:  # noqa: BLE001 - a failing close loses nothing of the episode
        pass


def run_episodes(
    tasks: Iterable[Task],
    policy: Policy,
    cfg: HarnessConfig | None = None,
    samples: int = 1,
    on_done: Callable[[Trajectory], None] | None = None,
    skip: Callable[[Task, int], bool] | None = None,
    progress: Callable[[int], None] | None = None,
    episode: Callable[..., Episode] = Episode,
) -> list[Trajectory]:
    """Run every (task, sample) episode to its end and return the trajectories.

    ``episode`` builds each episode (``harness.explore.guided(...)`` turns on guided exploration).

    ``skip(task, sample)`` lets a resumed collection leave finished episodes alone; ``on_done`` is
    called as each episode ends (the store appends there, so a crash loses only running episodes).
    Episodes are admitted in waves of ``policy.batch_size`` so memory stays bounded.
    """
    cfg = cfg or HarnessConfig()
    episode_demos(cfg, policy)  # a missing or changed pool fails here, before any episode runs
    pending = deque((t, s) for t in tasks for s in range(samples) if not (skip and skip(t, s)))
    for name in sorted({t.env for t, _ in pending}):
        env_class(name)  # an unknown environment fails here, before any episode runs
    done: list[Trajectory] = []
    active: list[Episode] = []

    forget = getattr(policy, "forget", None)  # a policy that keeps per-episode state (hf: its KV caches)

    def end(traj: Trajectory) -> None:
        done.append(traj)
        if forget is not None:
            forget(traj.task_id, traj.sample)
        if on_done:
            on_done(traj)
        if progress:
            progress(1)

    while pending or active:
        while pending and len(active) < policy.batch_size:
            ep = start(*pending.popleft(), policy, cfg, episode)
            if isinstance(ep, Trajectory):
                end(ep)
                continue
            if hasattr(policy, "check_toolset"):
                policy.check_toolset(ep.toolset.fingerprint)
            active.append(ep)
        if not active:
            continue
        t0 = time.perf_counter()
        gens = act_each(policy, [ep.request() for ep in active])
        gen_s = time.perf_counter() - t0
        still: list[Episode] = []
        for ep, gen in zip(active, gens):
            ep.take_turn(gen, gen_s, cfg)
            if ep.end:
                end(ep.finish())
            else:
                still.append(ep)
        active = still
    return done
