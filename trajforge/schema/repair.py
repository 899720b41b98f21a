"""Mistake: one realistic wrong move a self-repair demonstration makes before the right one.

Environments describe the mistakes that make sense for a task (``EnvSpec.mistakes``), the
generic kinds come from ``trajforge.tasks.repair``, and the repair policy
(``trajforge.policies.repair``) plays one: the reference up to ``at``, the mistaken turns
(executed for real, so the environment's real error or surprising result comes back), then the
reference from ``at`` on, its first turn opening with ``recovery``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from trajforge.schema.tools import ToolCall


class Mistake(BaseModel):
    """A wrong move and where it goes in a task's reference."""

    model_config = ConfigDict(frozen=True)

    kind: str
    """What kind of mistake: ``malformed``, ``wrong_tool``, ``bad_args``, ``wrong_table``,
    ``wrong_column``, ``wrong_entity``, ``nearest_template``, ``intermediate``,
    ``wrong_solution``, ... or a measured fail reason (``measured:<reason>``)."""
    at: int
    """Index of the reference call the mistake comes before (0: before the first)."""
    calls: tuple[ToolCall, ...] = ()
    """The mistaken calls, one per turn (empty when ``raw`` is the only turn)."""
    raw: str | None = None
    """Verbatim text of the first mistaken turn (a policy's own measured sample), instead of
    rendering ``calls[0]``."""
    broken: bool = False
    """The first call is written broken (malformed / cut off), so the parser refuses it."""
    recovery: str = ""
    """The sentence the recovery turn opens with: what came back and what to do instead."""
    words: str | None = None
    """The sentence before the first mistaken call, where the task's own reasoning for that call
    would name the right choice (travel's ``sold_out``: the reasoning names the option the fix
    books). None: the task's reasoning. A mistaken turn whose words name the fix teaches a model
    to copy its last turn (stop 57)."""
