"""Argument validation against a ToolSpec, shared by every dialect.

Order matters: coerce what the schema clearly asks for (``"3"`` → 3 for an integer parameter,
recorded as a repair), then validate with jsonschema. A call that still fails is an error and is
never dispatched with guessed or defaulted arguments.

Arguments that already fit the schema skip both steps: a checker compiled once per tool (kept in
the toolset's name index) accepts the common case in about a microsecond and answers "unsure" for
anything outside the simple subset tool schemas use, which then goes through jsonschema as before.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, NamedTuple

import jsonschema

from trajforge.schema import CallError, Repair, ToolCall, ToolSpec, Toolset

_Check = Callable[[Any], bool]


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


class _Entry(NamedTuple):
    """One tool of an indexed toolset: its spec and the compiled "surely valid" checker."""

    spec: ToolSpec
    check: _Check


_TOOLS: dict[int, tuple[Toolset, dict[str, _Entry]]] = {}


def _tool(toolset: Toolset, name: str) -> _Entry | None:
    """``toolset.get(name)`` (and its checker) through an index built once per (immutable) Toolset."""
    hit = _TOOLS.get(id(toolset))
    if hit is None or hit[0] is not toolset:
        if len(_TOOLS) > 1024:
            _TOOLS.clear()
        index: dict[str, _Entry] = {}
        for t in toolset.tools:
            if t.name not in index:  # first wins, as Toolset.get does
                index[t.name] = _Entry(t, _checker(t.parameters))
        hit = _TOOLS[id(toolset)] = (toolset, index)
    return hit[1].get(name)


# Full pydantic validation of a ToolCall from a dict: the same object ``ToolCall(...)`` builds, at
# about half the cost of the keyword-argument constructor (no Python-level __init__ frame).
_new_call = ToolCall.__pydantic_validator__.validate_python


def surely_valid_call(name: Any, arguments: Any, toolset: Toolset) -> ToolCall | None:
    """The call, when ``arguments`` certainly fit the named tool's schema exactly as written (no
    coercion needed); None otherwise, and ``validate_call`` then decides. The fast path of a
    well-formed turn: one index lookup, one compiled check, one pydantic validation."""
    if type(name) is str and type(arguments) is dict:
        entry = _tool(toolset, name)
        if entry is not None and entry.check(arguments):
            return _new_call({"name": name, "arguments": arguments})
    return None


def validate_call(
    name: Any, arguments: Any, toolset: Toolset
) -> tuple[ToolCall | None, CallError | None, list[Repair]]:
    """Check one parsed call; returns (call, None, repairs) or (None, error, repairs)."""
    repairs: list[Repair] = []
    if not isinstance(name, str) or not name:
        return None, CallError(kind="malformed", message="Tool call has no tool name."), repairs
    entry = _tool(toolset, name)
    if entry is None:
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
    if entry.check(arguments):  # the common case: no coercion, no validator built
        return _new_call({"name": name, "arguments": arguments}), None, repairs
    spec = entry.spec
    props = spec.parameters.get("properties", {})
    fixed = dict(arguments)
    for key, value in arguments.items():
        if key in props:
            new, changed = _coerce(value, props[key])
            if changed:
                fixed[key] = new
                repairs.append(Repair(kind="coerce_type", detail=f"{name}.{key}: {value!r} -> {new!r}"))
    if entry.check(fixed):
        return _new_call({"name": name, "arguments": fixed}), None, repairs
    error = _schema_error(name, fixed, spec.parameters)
    if error:
        return None, CallError(kind="invalid_args", message=error, tool=name), repairs
    return _new_call({"name": name, "arguments": fixed}), None, repairs


_ANNOTATIONS = {"description", "title", "default", "examples"}
_SIMPLE = {"type", "enum", "properties", "required", "additionalProperties", "items"} | _ANNOTATIONS
_TYPES: dict[str, tuple[type, ...]] = {  # exact Python types; anything else is left to jsonschema
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "array": (list,),
    "object": (dict,), "null": (type(None),),
}
_SCALARS = (str, int, float, bool, type(None))


def _always(value: Any) -> bool:
    return True


def _never(value: Any) -> bool:
    return False


def _compile(schema: Any) -> _Check:
    """A checker that says True only when a value certainly satisfies ``schema``.

    Covers the subset ``ToolSpec.from_function`` writes (type, enum, properties, required,
    additionalProperties, items, annotations); any other keyword compiles to "unsure" (False), as
    does every doubtful value (1.0 for an integer, a str subclass), so jsonschema keeps the last word.
    """
    if schema is True:
        return _always
    if not isinstance(schema, dict) or not schema.keys() <= _SIMPLE:
        return _never
    kind = schema.get("type")
    types: frozenset | None = None
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not all(isinstance(k, str) and k in _TYPES for k in kinds):
            return _never
        types = frozenset(t for k in kinds for t in _TYPES[k])
    enum = schema.get("enum")
    if enum is not None and not isinstance(enum, list):
        return _never
    options = frozenset((type(o), o) for o in enum if type(o) in _SCALARS) if enum is not None else None
    items = _compile(schema["items"]) if "items" in schema else None
    props, required = schema.get("properties", {}), schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(props, dict) or not isinstance(required, list):
        return _never
    prop_checks = {k: _compile(v) for k, v in props.items()}
    extra_check = _compile(extra)
    objects = bool(prop_checks or required or extra is not True)

    if options is None and items is None and not objects:  # a scalar parameter: one type test
        if types is None:
            return _always

        def type_test(value: Any) -> bool:
            return type(value) in types

        type_test.types = types  # type: ignore[attr-defined]  # lets an object check inline it
        return type_test
    # Most properties are one type test: done inline in the loop below, without a call per value.
    inline = {k: c.types for k, c in prop_checks.items() if hasattr(c, "types")}
    needed = frozenset(r for r in required if isinstance(r, str))
    if len(needed) != len(required):
        return _never

    def check(value: Any) -> bool:
        t = type(value)
        if types is not None and t not in types:
            return False
        if options is not None and (t not in _SCALARS or (t, value) not in options):
            return False
        if t is list and items is not None:
            for v in value:
                if not items(v):
                    return False
        elif t is dict and objects:
            if not needed.issubset(value):
                return False
            for k, v in value.items():
                kinds = inline.get(k)
                if kinds is None:
                    if not prop_checks.get(k, extra_check)(v):
                        return False
                elif type(v) not in kinds:
                    return False
        return True

    return check


def _checker(schema: dict[str, Any]) -> _Check:
    """The "surely valid" test for one parameters schema (the tool index keeps one per tool)."""
    return _compile(schema)


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
