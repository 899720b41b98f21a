"""Expert policy: replays each task's verified reference solution through the real environment.

The harness executes every call for real, so SFT data made from this policy is executed data: the
tool results in it are the environment's real outputs, not strings written at synthesis time. Each
call is preceded by one short natural sentence of reasoning, which the task's generator stored on
the task (``Task.reasoning``; pools read from disk get their environment's words where they lack
them); a task without any gets a neutral sentence naming the call.
"""

from __future__ import annotations

from trajforge._compat import moved_names
from trajforge.parse import Dialect, get_dialect
from trajforge.policies.base import Generation, TurnRequest


class ExpertPolicy:
    batch_size = 1024  # no model: any batch is free

    def __init__(self, dialect: Dialect | None = None, name: str = "expert"):
        self.name = name
        self.dialect = dialect or get_dialect("hermes")

    def act(self, requests: list[TurnRequest]) -> list[Generation]:
        return [self.reference_turn(req.task, req.turn) for req in requests]

    def reference_turn(self, task, i: int, opening: str = "", restate: bool = True) -> Generation:
        """Reference call ``i`` of ``task`` with its sentence (``opening`` before it; with
        ``restate`` False, ``opening`` instead of it)."""
        ref = task.reference
        if i >= len(ref):
            # The reference is exhausted without ending the episode; say so instead of calling.
            return Generation(text="I have no further steps in my plan.")
        call = ref[i]
        # Generators that write their words at generation time store them on the task.
        why = task.reasoning[i] if i < len(task.reasoning) else f"I'll call {call.name}."
        if opening and not restate:
            return Generation(text=self.dialect.render_assistant(opening, [call]))
        return Generation(text=self.dialect.render_assistant(f"{opening} {why}" if opening else why, [call]))


__getattr__ = moved_names(__name__, {"reasoning_for": "trajforge.envs.sql.tasks"})
