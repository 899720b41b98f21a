"""Pydantic data shared by every layer. No logic beyond validation; no torch.

``records`` holds what makes these shapes stored records: format versions, upgrades on read,
each fact of a step written once.
"""

from trajforge.schema.records import FORMAT, STORED, NewerFormatError
from trajforge.schema.repair import Mistake
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
    Verdict,
)

__all__ = [
    "FORMAT", "STORED", "CallError", "Fault", "Message", "Mistake", "NewerFormatError", "Outcome", "Repair", "Rescue",
    "RewardBreakdown", "SamplingConfig", "Split", "Step", "Task", "Tier", "ToolCall", "ToolResult", "ToolSpec",
    "Toolset", "Trajectory", "Verdict",
]
