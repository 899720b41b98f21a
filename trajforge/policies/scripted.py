"""Scripted policy for tests and dry runs: replies come from a list or a function, no model.

    ScriptedPolicy(["<tool_call>{...}</tool_call>", ...])          # same script for every task
    ScriptedPolicy(lambda req: "...")                               # decide per request
"""

from __future__ import annotations

from typing import Callable, Sequence

from trajforge.parse import Dialect, get_dialect
from trajforge.policies.base import Generation, TurnRequest


class ScriptedPolicy:
    batch_size = 64

    def __init__(self, script: Sequence[str] | Callable[[TurnRequest], str], name: str = "scripted",
                 dialect: Dialect | None = None):
        self.script = script
        self.name = name
        self.dialect = dialect or get_dialect("hermes")
        self.calls = 0
        """How many turns were generated (tests use it to prove a resume made no model calls)."""

    def act(self, requests: list[TurnRequest]) -> list[Generation]:
        out = []
        for req in requests:
            self.calls += 1
            if callable(self.script):
                text = self.script(req)
            else:
                text = self.script[min(req.turn, len(self.script) - 1)]
            out.append(Generation(text=text))
        return out
