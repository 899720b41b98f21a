"""Test-only environments for harness fault tests: a tool that hangs, a tool or a start that fails.

They are handed to executors through ``env_factory`` (the built-in registry stays untouched).
Each task's reference is what ``tests.openai_server`` replays, so the "model" calls these tools.
"""

from __future__ import annotations

import os
import time

from trajforge.envs import Environment, InfraError, ToolError, Verdict, make_env
from trajforge.schema import Task, ToolCall

class FaultyEnv(Environment):
    """``wait`` hangs forever, ``flaky`` crashes on its first ``crashes`` calls, ``submit_answer``
    ends the episode. Class counters are per process (tests reset them)."""

    name = "faulty"
    tool_names = ("wait", "flaky", "pid", "submit_answer")
    final_tool = "submit_answer"
    crashes = 0
    """How many ``flaky`` calls still crash (shared by all instances)."""
    failing_starts = 0
    """How many ``reset`` calls still raise."""

    def reset(self, task: Task) -> str:
        if FaultyEnv.failing_starts > 0:
            FaultyEnv.failing_starts -= 1
            raise ConnectionError("sandbox did not come up")
        self.answer = None
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
        self.answer = answer
        return "submitted"

    def verify(self) -> Verdict:
        expected = self.task.expected if self.task else None
        return Verdict(submitted=self.answer is not None, answer=self.answer,
                       correct=self.answer == expected)


def faulty_task(i: int, *calls: str) -> Task:
    """A task whose reference calls ``calls`` in order, then submits ``"42"``."""
    ref = tuple(ToolCall(name=c, arguments={}) for c in calls)
    ref += (ToolCall(name="submit_answer", arguments={"answer": "42"}),)
    return Task(id=f"faulty-{i}", env="faulty", prompt=f"Task {i}: do {', '.join(calls)}.", tier="easy",
                split="train", template="faulty", reference=ref, expected="42")


def factory(task: Task) -> Environment:
    """Faulty tasks get ``FaultyEnv``; the rest their registered environment."""
    return FaultyEnv() if task.env == "faulty" else make_env(task.env, seed=task.seed)
