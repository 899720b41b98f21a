"""Pydantic data shared by every layer. No logic beyond validation; no torch."""

from trajforge.schema.task import Split, Task, Tier
from trajforge.schema.tools import ToolCall, ToolSpec, Toolset
from trajforge.schema.trajectory import (
    CallError,
    Message,
    Outcome,
    Repair,
    RewardBreakdown,
    Step,
    ToolResult,
    Trajectory,
)

__all__ = [
    "CallError", "Message", "Outcome", "Repair", "RewardBreakdown", "Split", "Step", "Task",
    "Tier", "ToolCall", "ToolResult", "ToolSpec", "Toolset", "Trajectory",
]
