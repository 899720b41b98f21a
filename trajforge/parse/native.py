"""Structured ``tool_calls`` from OpenAI-compatible responses, validated like any dialect's calls."""

from __future__ import annotations

import json
from typing import Any

import json_repair

from trajforge.parse.base import ParseResult
from trajforge.parse.validate import validate_call
from trajforge.schema import CallError, Repair, Toolset


def parse_tool_calls(tool_calls: list[dict[str, Any]], content: str, toolset: Toolset) -> ParseResult:
    """Validate ``[{"id", "function": {"name", "arguments": "<json string>"}}]`` calls."""
    result = ParseResult(text=(content or "").strip())
    if not tool_calls:
        result.errors.append(CallError(kind="no_call", message="No tool call found. Call one of the tools."))
        return result
    for tc in tool_calls:
        fn = tc.get("function", {})
        raw = fn.get("arguments", {})
        repairs: list[Repair] = []
        if isinstance(raw, str):
            try:
                raw = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError:
                raw = json_repair.loads(raw)
                repairs.append(Repair(kind="json_repair", detail=str(fn.get("arguments"))[:80]))
        call, error, arg_repairs = validate_call(fn.get("name"), raw, toolset)
        if error:
            result.errors.append(error)
            continue
        result.calls.append(call.model_copy(update={"id": tc.get("id")}))
        result.repairs.extend(repairs + arg_repairs)
    return result
