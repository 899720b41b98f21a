"""Pydantic data shared by every layer. No logic beyond validation; no torch."""

from trajforge.schema.task import Split, Task, Tier
from trajforge.schema.tools import ToolCall, ToolSpec, Toolset
from trajforge.schema.trajectory import (
    CallError,
    Fault,
    Message,
    Outcome,
    Repair,
    Rescue,
    RewardBreakdown,
    SamplingConfig,
    Step,
    ToolResult,
    Trajectory,
)

__all__ = [
    "CallError", "Fault", "Message", "Outcome", "Repair", "Rescue", "RewardBreakdown", "SamplingConfig",
    "Split", "Step", "Task", "Tier", "ToolCall", "ToolResult", "ToolSpec", "Toolset", "Trajectory",
]
