"""Argument validation against a ToolSpec, shared by every dialect.

Order matters: coerce what the schema clearly asks for (``"3"`` → 3 for an integer parameter,
recorded as a repair), then validate with jsonschema. A call that still fails is an error and is
never dispatched with guessed or defaulted arguments.
"""

from __future__ import annotations

import difflib
from typing import Any

import jsonschema

from trajforge.schema import CallError, Repair, ToolCall, Toolset


def _coerce(value: Any, schema: dict[str, Any]) -> tuple[Any, bool]:
    """Return (value, changed) after a safe scalar coercion toward ``schema['type']``."""
    kind = schema.get("type")
    if isinstance(value, str):
        text = value.strip()
        try:
            if kind == "integer" and text.lstrip("-").isdigit():
                return int(text), True
            if kind == "number":
                return float(text), True
        except ValueError:
            return value, False
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true", True
    if kind == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
        # Models often emit a bare number where the schema wants text (an answer, an id).
        return str(value), True
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value), True
    return value, False


def closest_tool(name: str, toolset: Toolset) -> str | None:
    match = difflib.get_close_matches(name, toolset.names, n=1, cutoff=0.5)
    return match[0] if match else None


def validate_call(
    name: Any, arguments: Any, toolset: Toolset
) -> tuple[ToolCall | None, CallError | None, list[Repair]]:
    """Check one parsed call; returns (call, None, repairs) or (None, error, repairs)."""
    repairs: list[Repair] = []
    if not isinstance(name, str) or not name:
        return None, CallError(kind="malformed", message="Tool call has no tool name."), repairs
    spec = toolset.get(name)
    if spec is None:
        hint = closest_tool(name, toolset)
        extra = f" Did you mean {hint!r}?" if hint else ""
        return None, CallError(
            kind="unknown_tool",
            message=f"Unknown tool {name!r}.{extra} Available tools: {', '.join(toolset.names)}.",
            tool=name,
        ), repairs
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return None, CallError(
            kind="invalid_args", message=f"Arguments for {name} must be a JSON object.", tool=name
        ), repairs
    props = spec.parameters.get("properties", {})
    fixed = dict(arguments)
    for key, value in arguments.items():
        if key in props:
            new, changed = _coerce(value, props[key])
            if changed:
                fixed[key] = new
                repairs.append(Repair(kind="coerce_type", detail=f"{name}.{key}: {value!r} -> {new!r}"))
    error = _schema_error(name, fixed, spec.parameters)
    if error:
        return None, CallError(kind="invalid_args", message=error, tool=name), repairs
    return ToolCall(name=name, arguments=fixed), None, repairs


def _schema_error(name: str, arguments: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """A short model-facing message for the first schema violation, or None."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(arguments), key=lambda e: (len(e.path), e.message))
    if not errors:
        return None
    err = errors[0]
    where = ".".join(str(p) for p in err.path)
    if err.validator == "required":
        missing = [r for r in schema.get("required", []) if r not in arguments]
        return f"{name}: missing required argument {missing[0]!r}."
    if err.validator == "additionalProperties":
        extra = sorted(set(arguments) - set(schema.get("properties", {})))
        allowed = ", ".join(schema.get("properties", {})) or "none"
        return f"{name}: unexpected argument {extra[0]!r} (allowed: {allowed})."
    if err.validator == "enum":
        return f"{name}: {where} must be one of {err.validator_value}."
    if err.validator == "type":
        return f"{name}: {where} must be of type {err.validator_value}, got {type(err.instance).__name__}."
    return f"{name}: {where or 'arguments'}: {err.message}"
