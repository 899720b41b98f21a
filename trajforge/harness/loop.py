"""The episode loop: render → generate → parse → validate → execute → feed back, batched.

All episodes waiting for a turn are handed to the policy together (the hf policy generates them as
one padded batch), then each episode's text is parsed and its valid calls are executed in its own
environment. Errors go back to the model as tool messages it can recover from; an episode ends on
the environment's final tool, after ``max_turns``, after ``max_consecutive_errors`` turns in a row
with no valid call, or on an infrastructure fault.

Run it through ``run_episodes`` (library) or ``trajforge collect`` / ``trajforge eval`` (CLI).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from pydantic import BaseModel

from trajforge.envs import Environment, make_env
from trajforge.envs.toolsets import KNOWN, class_toolset
from trajforge.harness.budget import turn_budget
from trajforge.parse.base import ParseResult
from trajforge.parse.openai import parse_tool_calls
from trajforge.policies.base import Generation, Policy, TurnRequest
from trajforge.schema import Message, Step, Task, ToolCall, ToolResult, Toolset, Trajectory, Verdict


class HarnessConfig(BaseModel):
    """How episodes are run."""

    max_turns: int | None = None
    """Assistant turns per episode before it ends with ``max_turns``; None: each task's own budget
    (twice its reference plus slack, else its environment's default; ``harness.budget``)."""
    max_consecutive_errors: int = 3
    """Turns in a row without any valid call before the episode ends."""
    instructions: str | None = None
    """System instructions above the dialect's tool block; None uses the environment's own. They
    are part of the toolset the model sees, so another text is another toolset fingerprint."""


def shown_toolset(env: Any, cfg: HarnessConfig) -> Toolset:
    """The toolset an episode shows the model: the environment's (built once per class; a handle
    or a pipeline role's view gives its own), under ``cfg.instructions`` when set."""
    base = class_toolset(type(env)) if isinstance(env, Environment) else env.toolset()
    if cfg.instructions is None:
        return base
    return KNOWN.canonical(base.with_instructions(cfg.instructions))


def first_message(task: Task, observation: str) -> str:
    """The user turn: the task's request, then what the environment showed at ``reset``."""
    return f"{task.prompt}\n\n{observation}" if observation else task.prompt


class Episode:
    """Mutable state of one running episode.

    ``observation``: what ``env.reset(task)`` returned; the model sees it below the prompt."""

    def __init__(self, task: Task, sample: int, env: Environment, policy: Policy, cfg: HarnessConfig,
                 observation: str = ""):
        self.task, self.sample, self.env = task, sample, env
        self.toolset = shown_toolset(env, cfg)
        self.messages = [Message(role="system", content=self.toolset.instructions),
                         Message(role="user", content=first_message(task, observation))]
        self.steps: list[Step] = []
        self.errors_in_row = 0
        self.end = ""
        self.started = time.perf_counter()
        self.policy = policy

    def request(self) -> TurnRequest:
        return TurnRequest(self.task, self.messages, self.toolset, len(self.steps))

    def advance(self, gen: Generation, gen_s: float, cfg: HarnessConfig) -> None:
        """Parse one generation, execute its valid calls, append messages; maybe end."""
        step, parsed = self.respond(gen, gen_s)
        t0 = time.perf_counter()
        for call in parsed.calls:
            result = self.env.execute(call)
            if self.record(step, call, result, self.env.done):
                break
        self.close_step(step, parsed, time.perf_counter() - t0, cfg)

    # The pieces of ``advance``, for harnesses that execute calls elsewhere (async, Ray actors).

    def respond(self, gen: Generation, gen_s: float) -> tuple[Step, ParseResult]:
        """Parse one generation into a new step and append the assistant message."""
        if gen.native_calls is not None:
            parsed = parse_tool_calls(gen.native_calls, gen.text, self.toolset, gen.finish_reason)
        else:
            parsed = self.policy.dialect.parse(gen.text, self.toolset)
        native = gen.native_calls is not None
        step = Step(index=len(self.steps), raw=gen.text, calls=parsed.calls, errors=parsed.errors,
                    repairs=parsed.repairs, prompt_ids=gen.prompt_ids,
                    completion_ids=gen.completion_ids, gen_s=gen_s,
                    completion_logprobs=gen.completion_logprobs, native=native)
        self.messages.append(Message(role="assistant", content=parsed.text, tool_calls=parsed.calls,
                                     raw=None if native else gen.text))
        return step, parsed

    def record(self, step: Step, call: ToolCall, result: ToolResult, env_done: bool) -> bool:
        """Feed one executed call's result back; True when it ended the episode (the remaining
        calls of the turn are then not executed)."""
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
        self.steps.append(step)
        self.errors_in_row = 0 if parsed.calls else self.errors_in_row + 1
        if not self.end and self.errors_in_row >= cfg.max_consecutive_errors:
            self.end = "max_errors"
        if not self.end and len(self.steps) >= turn_budget(self.task, cfg.max_turns):
            self.end = "max_turns"

    def finish(self) -> Trajectory:
        verdict = self.env.verify()
        self.env.close()
        return self.trajectory(verdict)

    def trajectory(self, verdict: Verdict | None) -> Trajectory:
        """The record of this episode as it stands, with the environment's verdict."""
        return Trajectory(
            task_id=self.task.id, sample=self.sample, policy=self.policy.name, env=self.task.env,
            toolset_fingerprint=self.toolset.fingerprint, dialect=self.policy.dialect.name,
            tier=self.task.tier, split=self.task.split, messages=self.messages, steps=self.steps,
            verdict=verdict, end=self.end, reference_turns=len(self.task.reference),
            wall_s=time.perf_counter() - self.started,
        )


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
    pending = [(t, s) for t in tasks for s in range(samples) if not (skip and skip(t, s))]
    done: list[Trajectory] = []
    active: list[Episode] = []
    while pending or active:
        while pending and len(active) < policy.batch_size:
            task, sample = pending.pop(0)
            env = make_env(task.env, seed=task.seed)
            observation = env.reset(task)
            ep = episode(task, sample, env, policy, cfg, observation=observation)
            if hasattr(policy, "check_toolset"):
                policy.check_toolset(ep.toolset.fingerprint)
            active.append(ep)
        t0 = time.perf_counter()
        gens = policy.act([ep.request() for ep in active])
        gen_s = time.perf_counter() - t0
        still: list[Episode] = []
        for ep, gen in zip(active, gens):
            ep.advance(gen, gen_s, cfg)
            if ep.end:
                traj = ep.finish()
                done.append(traj)
                if on_done:
                    on_done(traj)
                if progress:
                    progress(1)
            else:
                still.append(ep)
        active = still
    return done
