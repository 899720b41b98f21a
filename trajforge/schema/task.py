"""Task: one verifiable job for an environment, with its executed reference solution."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints

from trajforge._version import __version__
from trajforge.schema import records
from trajforge.schema.tools import ToolCall

Tier = Literal["easy", "medium", "hard"]
Split = Annotated[str, StringConstraints(
    min_length=1, max_length=200,
    pattern=r"^[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f])?$")]
"""A split label, kept as given: ``train``, ``test``, ``heldout`` (what the generators write), or
any other (``dev``, ``validation``, ``test-challenge``): any text without control characters or
surrounding spaces, up to 200 characters. What each label is *for*
(training, evaluation, held out) is chosen by name where it is used (``tasks.splits.SplitRoles``).
Records from before labels were free are all still valid."""


class Task(records.StoredRecord):
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
    world: int = 0
    """Which world of the environment's generator the task lives in (renamed entities; SQL's schema
    worlds rename tables and columns too; ``envs/<name>/worlds.py``): 0 is the original world,
    where test and held-out tasks always are. Left out of the stored form when 0, so world-0 pools
    are written exactly as before the field existed, and records without it read as world 0."""
    reasoning: tuple[str, ...] = ()
    """One sentence the expert says before each reference call, written by the task's generator;
    a pool read from disk fills it from the environment's ``EnvSpec.reasoning`` where it is empty."""
    db: str | None = None
    """SQLite file the ``sql`` environment opens (read-only) instead of its generated database;
    set for bring-your-own-data tasks. An absolute path, so the pool works from any directory."""
    db_sha256: str | None = None
    """SHA-256 of ``db``'s content when the task was made; the environment refuses a file that no
    longer matches (its answers would be stale). None in pools written before it was recorded."""
    toolset_fingerprint: str | None = None
    """Fingerprint of the toolset the reference was made and verified with (the pool's
    ``toolsets/<fingerprint>.json``); None in pools written before it was recorded, until read."""
    format: int = records.FORMAT
    """Record format version."""
    trajforge_version: str = __version__
    """trajforge version that wrote the record ("" when it predates the field)."""

    reader = staticmethod(records.read_task)
    writer = staticmethod(records.write_task)
