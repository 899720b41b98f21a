"""Argument validation against a ToolSpec, shared by every dialect.

Order matters: coerce what the schema clearly asks for (``"3"`` → 3 for an integer parameter,
recorded as a repair), then validate with jsonschema. A call that still fails is an error and is
never dispatched with guessed or defaulted arguments.

Arguments that already fit the schema skip both steps: a checker compiled once per tool (kept in
the toolset's name index) accepts the common case in about a microsecond and answers "unsure" for
anything outside the simple subset tool schemas use, which then goes through jsonschema as before.
The checker also says "unsure" for anything that might not be storable JSON (a lone surrogate, a
non-finite float, deep nesting: see ``limits``); the slow path then settles the arguments first,
repairing strings (recorded) or rejecting the call as ``invalid_args``.
"""

from __future__ import annotations

import difflib
import itertools
import math
from typing import Any, Callable

import jsonschema

from trajforge.parse.limits import INT_BITS, clean_text, settle, short, storable
from trajforge.schema import CallError, Repair, ToolCall, ToolSpec, Toolset

_Check = Callable[[Any], bool]


def _coerce(value: Any, schema: dict[str, Any]) -> tuple[Any, bool]:
    """Return (value, changed) after a safe scalar coercion toward ``schema['type']``."""
    kind = schema.get("type")
    if isinstance(value, str):
        text = value.strip()
        try:
            if kind == "integer" and text.lstrip("-").isdigit():
                return int(text), True  # past the int-string limit: ValueError, left as it is
            if kind == "number":
                number = float(text)
                # "nan", "inf" and "1e999" read as floats JSON cannot hold: left as text, so the
                # call fails validation rather than storing a non-finite number.
                return (number, True) if math.isfinite(number) else (value, False)
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
    # A tool name is short: a model-written megabyte is cut before difflib compares it.
    match = difflib.get_close_matches(name[:200], toolset.names, n=1, cutoff=0.5)
    return match[0] if match else None


class _Entry:
    """One tool of an indexed toolset: its spec, the compiled "surely valid" checker, and its
    jsonschema validator, built the first time a call to the tool fails the checker."""

    __slots__ = ("spec", "check", "_validator")

    def __init__(self, spec: ToolSpec, check: _Check):
        self.spec, self.check, self._validator = spec, check, None

    @property
    def validator(self) -> jsonschema.Draft202012Validator:
        if self._validator is None:
            self._validator = jsonschema.Draft202012Validator(self.spec.parameters)
        return self._validator


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
            message=f"Unknown tool {short(name)}.{extra} Available tools: {', '.join(toolset.names)}.",
            tool=clean_text(name[:200]),
        ), repairs
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return None, CallError(
            kind="invalid_args", message=f"Arguments for {name} must be a JSON object.", tool=name
        ), repairs
    if entry.check(arguments):  # the common case: no coercion, no validator built
        return _new_call({"name": name, "arguments": arguments}), None, repairs
    settled = settle(arguments)  # before anything reads the values: storable JSON, or an error
    if settled.problem:
        return None, CallError(kind="invalid_args", message=f"{name}: {settled.problem}.", tool=name), repairs
    if settled.repaired:
        arguments = settled.value
        repairs.append(Repair(kind="lone_surrogate", detail=f"{name}: lone surrogates replaced by U+FFFD"))
    spec = entry.spec
    props = spec.parameters.get("properties", {})
    fixed = dict(arguments)
    for key, value in arguments.items():
        if key in props:
            new, changed = _coerce(value, props[key])
            if changed:
                fixed[key] = new
                repairs.append(Repair(kind="coerce_type", detail=f"{name}.{key}: {short(value)} -> {short(new)}"))
    if entry.check(fixed):
        return _new_call({"name": name, "arguments": fixed}), None, repairs
    error = _schema_error(name, fixed, entry)
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


def _never(value: Any) -> bool:
    return False


def _compile(schema: Any) -> _Check:
    """A checker that says True only when a value certainly satisfies ``schema``.

    Covers the subset ``ToolSpec.from_function`` writes (type, enum, properties, required,
    additionalProperties, items, annotations); any other keyword compiles to "unsure" (False), as
    does every doubtful value (1.0 for an integer, a str subclass), so jsonschema keeps the last word.
    A value the schema leaves open (no type, a bare array or object) must also be ``storable``.
    """
    if schema is True:
        return storable
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
            return storable

        def type_test(value: Any) -> bool:
            t = type(value)
            if t not in types:
                return False
            if t is str:  # ASCII text is storable as it is; only other text is looked at
                return value.isascii() or storable(value)
            if t is float:
                return value - value == 0.0  # finite
            if t is int:
                return value.bit_length() <= INT_BITS
            return t is bool or value is None or storable(value)

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
                    named = prop_checks.get(k)
                    if named is None:  # a key the schema does not name: it must be storable text too
                        if type(k) is not str or not (k.isascii() or storable(k)) or not extra_check(v):
                            return False
                    elif not named(v):
                        return False
                else:  # the checks of type_test, inline (a named key is the schema's own clean text)
                    tv = type(v)
                    if tv not in kinds:
                        return False
                    if tv is str:
                        if not v.isascii() and not storable(v):
                            return False
                    elif tv is float:
                        if v - v != 0.0:
                            return False
                    elif tv is int:
                        if v.bit_length() > INT_BITS:
                            return False
                    elif tv is not bool and v is not None and not storable(v):
                        return False
        else:  # a scalar, or a container the schema does not describe
            return storable(value)
        return True

    return check


def _checker(schema: dict[str, Any]) -> _Check:
    """The "surely valid" test for one parameters schema (the tool index keeps one per tool)."""
    return _compile(schema)


def _schema_error(name: str, arguments: dict[str, Any], entry: _Entry) -> str | None:
    """A short model-facing message for the first schema violation, or None.

    At most the first 64 violations are looked at: a list of 100,000 wrong items would otherwise
    build 100,000 messages (each with the offending value's repr) to report one.
    """
    schema = entry.spec.parameters
    errors = sorted(itertools.islice(entry.validator.iter_errors(arguments), 64),
                    key=lambda e: (len(e.path), e.message))
    if not errors:
        return None
    err = errors[0]
    where = clean_text(".".join(str(p) for p in err.path)[:200])
    if err.validator == "required":
        missing = [r for r in schema.get("required", []) if r not in arguments]
        return f"{name}: missing required argument {missing[0]!r}."
    if err.validator == "additionalProperties":
        extra = sorted(set(arguments) - set(schema.get("properties", {})))
        allowed = ", ".join(schema.get("properties", {})) or "none"
        return f"{name}: unexpected argument {short(extra[0])} (allowed: {allowed})."
    if err.validator == "enum":
        return f"{name}: {where} must be one of {err.validator_value}."
    if err.validator == "type":
        return f"{name}: {where} must be of type {err.validator_value}, got {type(err.instance).__name__}."
    message = err.message if len(err.message) <= 300 else err.message[:300] + "…"
    return f"{name}: {where or 'arguments'}: {clean_text(message)}"
