"""Task: one verifiable job for an environment, with its executed reference solution."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trajforge.schema.tools import ToolCall

Tier = Literal["easy", "medium", "hard"]
Split = Literal["train", "test", "heldout"]


class Task(BaseModel):
    """A task as stored in a task pool (one JSONL line)."""

    model_config = ConfigDict(frozen=True)

    id: str
    """Stable id, unique within a pool."""
    env: str
    """Environment name (``sql``)."""
    prompt: str
    """The user's request, shown verbatim to the model."""
    tier: Tier
    """Difficulty tier."""
    split: Split
    """Which split the task belongs to."""
    template: str
    """Generator template id, so splits can hold whole templates out."""
    reference: tuple[ToolCall, ...]
    """Reference solution: tool calls that were executed and verified at generation time."""
    expected: Any
    """Expected answer (number, string or list of strings) the verifier compares against."""
    entities: dict[str, Any] = Field(default_factory=dict)
    """Entity values filled into the template (city, product, ...)."""
    seed: int = 0
    """Environment seed (which generated database)."""
    reasoning: tuple[str, ...] = ()
    """One sentence the expert says before each reference call, where the generator wrote them at
    generation time (travel); empty means the environment's template wording is looked up."""
    db: str | None = None
    """SQLite file the ``sql`` environment opens (read-only) instead of its generated database;
    set for bring-your-own-data tasks. An absolute path, so the pool works from any directory."""
