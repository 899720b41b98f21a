"""Test-only environments for harness fault tests: a tool that hangs, a tool or a start that fails,
an environment that breaks at a named stage, one whose tools take every parameter type.

They are handed to executors through ``env_factory`` (the built-in registry stays untouched).
Each task's reference is what ``tests.openai_server`` replays, so the "model" calls these tools.
"""

from __future__ import annotations

import os
import time
from typing import Literal

from trajforge.envs import Environment, InfraError, ToolError, Verdict, make_env
from trajforge.schema import Task, ToolCall

class AnswerEnv(Environment):
    """Base of the toy environments that end with ``submit_answer``: correct when the answer is the
    task's expected one."""

    final_tool = "submit_answer"
    state_fields = ("answer",)

    def reset(self, task: Task) -> str:
        self.answer = None
        return super().reset(task)

    def submit_answer(self, answer: str) -> str:
        """Submit the final answer.

        Args:
            answer: the answer
        """
        self.answer = answer
        return "submitted"

    def verify(self) -> Verdict:
        expected = self.task.expected if self.task else None
        return Verdict(submitted=self.answer is not None, answer=self.answer,
                       correct=self.answer == expected)


class FaultyEnv(AnswerEnv):
    """``wait`` hangs forever, ``flaky`` crashes on its first ``crashes`` calls, ``submit_answer``
    ends the episode. Class counters are per process (tests reset them)."""

    name = "faulty"
    tool_names = ("wait", "flaky", "pid", "submit_answer")
    crashes = 0
    """How many ``flaky`` calls still crash (shared by all instances)."""
    failing_starts = 0
    """How many ``reset`` calls still raise."""

    def reset(self, task: Task) -> str:
        if FaultyEnv.failing_starts > 0:
            FaultyEnv.failing_starts -= 1
            raise ConnectionError("sandbox did not come up")
        return super().reset(task)

    def wait(self) -> str:
        """Wait for an event that never comes."""
        while True:
            time.sleep(3600)

    def pid(self) -> str:
        """The id of the process this environment runs in."""
        return str(os.getpid())

    def flaky(self) -> str:
        """Return ok, unless the backend crashes."""
        if FaultyEnv.crashes > 0:
            FaultyEnv.crashes -= 1
            raise InfraError("backend crashed")  # declared: only that is an env fault
        return "ok"

    def submit_answer(self, answer: str) -> str:
        """Submit the final answer.

        Args:
            answer: the answer
        """
        if not answer:
            raise ToolError("empty answer", kind="empty_answer")
        return super().submit_answer(answer)


def faulty_task(i: int, *calls: str) -> Task:
    """A task whose reference calls ``calls`` in order, then submits ``"42"``."""
    ref = tuple(ToolCall(name=c, arguments={}) for c in calls)
    ref += (ToolCall(name="submit_answer", arguments={"answer": "42"}),)
    return Task(id=f"faulty-{i}", env="faulty", prompt=f"Task {i}: do {', '.join(calls)}.", tier="easy",
                split="train", template="faulty", reference=ref, expected="42")


def factory(task: Task) -> Environment:
    """Faulty and breakable tasks get ``FaultyEnv`` and ``BreakableEnv``; the rest their registered
    environment."""
    if task.env in TOYS:
        return TOYS[task.env]()
    return make_env(task.env, seed=task.seed)


class TypedEnv(AnswerEnv):
    """A cheap environment whose tools take every JSON parameter type (string, integer, number,
    boolean, array, object, enum), so hostile arguments meet the argument checker on each; the
    tools only summarise what they received. Registered as ``typed`` by the tests that use it."""

    name = "typed"
    tool_names = ("echo", "configure", "submit_answer")

    def echo(self, text: str, times: int = 1) -> str:
        """Repeat a text.

        Args:
            text: what to repeat
            times: how often (at most 3 are shown)
        """
        return text[:200] * max(0, min(times, 3))

    def configure(self, ratio: float, flag: bool, tags: list[str], spec: dict,
                  mode: Literal["fast", "exact"] = "fast") -> str:
        """Set options.

        Args:
            ratio: a number
            flag: a switch
            tags: labels
            spec: free-form settings
            mode: fast or exact
        """
        self.reach("configured")
        return f"ratio={ratio} flag={flag} tags={len(tags)} keys={len(spec)} mode={mode}"


def typed_task(i: int) -> Task:
    """A task on ``TypedEnv`` whose reference configures, then submits ``"ok"``."""
    ref = (ToolCall(name="configure", arguments={"ratio": 0.5, "flag": True, "tags": ["a"], "spec": {}}),
           ToolCall(name="submit_answer", arguments={"answer": "ok"}))
    return Task(id=f"typed-{i}", env="typed", prompt=f"Task {i}: configure, then answer ok.", tier="easy",
                split="heldout", template="typed", reference=ref, expected="ok")


class BreakableEnv(AnswerEnv):
    """An environment that breaks at one stage, named by its task's ``expected`` answer (see
    ``broken_task``): ``reset``, ``execute`` (an exception escapes ``execute`` itself, past the
    dispatch), ``execute_type`` (``execute`` returns a str), ``verify``, ``verify_type``
    (``verify`` returns a number), ``verify_none`` (it returns None), ``close``, ``snapshot`` (every snapshot raises),
    ``snapshot_later`` (snapshots after the first raise), ``restore``; ``none`` breaks nothing."""

    name = "breakable"
    tool_names = ("poke", "submit_answer")

    def reset(self, task: Task) -> str:
        self.stage, self.snapshots = task.expected, 0
        if self.stage == "reset":
            raise ConnectionError("backend did not come up")
        return super().reset(task)

    def poke(self) -> str:
        """Touch the backend."""
        return "poked"

    def execute(self, call: ToolCall):
        if self.stage == "execute":
            raise RuntimeError("dispatch itself crashed")
        if self.stage == "execute_type":
            return "not a ToolResult"
        return super().execute(call)

    def verify(self):
        if self.stage == "verify":
            raise RuntimeError("verifier crashed")
        if self.stage == "verify_type":
            return 42
        if self.stage == "verify_none":
            return None
        return super().verify()

    def close(self) -> None:
        if self.stage == "close":
            raise OSError("could not release the backend")

    def snapshot(self):
        self.snapshots += 1
        if self.stage == "snapshot" or (self.stage == "snapshot_later" and self.snapshots > 1):
            raise MemoryError("snapshot too large")
        return super().snapshot()

    def restore(self, snap) -> None:
        if self.stage == "restore":
            raise RuntimeError("restore failed half way")
        super().restore(snap)


def broken_task(stage: str, i: int = 0) -> Task:
    """A ``BreakableEnv`` task that breaks at ``stage``; solved by poking, then submitting ``stage``."""
    ref = (ToolCall(name="poke"), ToolCall(name="submit_answer", arguments={"answer": stage}))
    return Task(id=f"break-{stage}-{i}", env="breakable", prompt=f"Poke, then answer {stage}.", tier="easy",
                split="train", template="breakable", reference=ref, expected=stage)


TOYS: dict[str, type[Environment]] = {"faulty": FaultyEnv, "breakable": BreakableEnv}
"""The toy environments ``factory`` builds (executors get them without the registry)."""
