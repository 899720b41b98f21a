"""ToolSpec, Toolset and ToolCall: the one tool schema every other layer derives from.

A tool is a typed Python function; its JSON Schema comes from the signature and the docstring
(Google style ``Args:`` section), so a user writes a function, not a schema.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
import types
import typing
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _type_schema(annotation: Any) -> dict[str, Any]:
    """JSON Schema for one Python annotation (the subset tools need)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    if origin is Literal:
        kinds = {_JSON_TYPES[type(a)] for a in args}
        return {"type": kinds.pop() if len(kinds) == 1 else sorted(kinds), "enum": list(args)}
    if origin in (list, tuple) or annotation in (list, tuple):
        item = _type_schema(args[0]) if args else {}
        return {"type": "array", "items": item} if item else {"type": "array"}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    if origin in (typing.Union, types.UnionType):
        non_null = [a for a in args if a is not type(None)]
        if len(non_null) == 1:
            return _type_schema(non_null[0])
        return {"anyOf": [_type_schema(a) for a in non_null]}
    raise TypeError(f"unsupported tool parameter annotation: {annotation!r}")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (summary, {param: description})."""
    doc = inspect.cleandoc(doc or "")
    head, _, rest = doc.partition("\nArgs:")
    params: dict[str, str] = {}
    current = None
    for line in rest.splitlines():
        if re.match(r"^\S", line):  # next section ("Returns:") ends Args
            break
        m = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
        if m:
            current = m.group(1)
            params[current] = m.group(2).strip()
        elif current and line.strip():
            params[current] += " " + line.strip()
    summary = " ".join(head.strip().split())
    return summary, params


class ToolSpec(BaseModel):
    """One tool as the model sees it: OpenAI-style function schema."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Function name the model calls."""
    description: str
    """One-paragraph description shown to the model."""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments object."""

    @classmethod
    def from_function(cls, fn: Callable[..., Any], name: str | None = None) -> "ToolSpec":
        """Build the spec from a typed function and its docstring; ``self`` is skipped."""
        sig = inspect.signature(fn)
        hints = typing.get_type_hints(fn)
        summary, docs = _parse_docstring(fn.__doc__ or "")
        props: dict[str, Any] = {}
        required: list[str] = []
        for pname, param in sig.parameters.items():
            if pname == "self":
                continue
            if pname not in hints:
                raise TypeError(f"tool {fn.__name__}: parameter {pname!r} has no type annotation")
            schema = _type_schema(hints[pname])
            if pname in docs:
                schema["description"] = docs[pname]
            props[pname] = schema
            if param.default is inspect.Parameter.empty:
                required.append(pname)
        parameters: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            parameters["required"] = required
        parameters["additionalProperties"] = False
        return cls(name=name or fn.__name__, description=summary, parameters=parameters)

    def openai(self) -> dict[str, Any]:
        """The OpenAI ``tools=[...]`` entry for this spec."""
        return {"type": "function", "function": self.model_dump()}


class Toolset(BaseModel):
    """What the model is told about its tools: the tools in order, and the instructions above them.

    Its ``fingerprint`` names it in stored data: a trajectory records the fingerprint of the
    toolset it was shown, and a store keeps that toolset as ``toolsets/<fingerprint>.json``.
    """

    model_config = ConfigDict(frozen=True)

    tools: tuple[ToolSpec, ...]
    """The tools, in the order they are shown to the model."""
    instructions: str = ""
    """System instructions shown above the tool block (the environment's, a pipeline role's, or
    ``HarnessConfig.instructions``); part of what the model sees, so part of the fingerprint."""

    def get(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 over the canonical JSON of everything the model sees (tools sorted by name, and
        the instructions); 16 hex chars. Computed once per object (stores look it up per record).

        Order-independent so re-ordering a tool list does not invalidate data; any change to a
        name, description, parameter schema or the instructions does.
        """
        return _digest({"instructions": self.instructions.strip(), "tools": _canonical_tools(self.tools)})

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> "Toolset":
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("fingerprint", None)  # a copy with other fields has another fingerprint
        return copy

    @property
    def tools_fingerprint(self) -> str:
        """The same digest over the tools alone: whether two toolsets offer the same tools. It is
        also what trajforge 0.1 called the fingerprint, so stores and adapters from then carry it
        (``trajforge migrate`` maps it to ``fingerprint``)."""
        return _digest(_canonical_tools(self.tools))

    def with_instructions(self, instructions: str) -> "Toolset":
        """The same tools under other instructions."""
        return self if instructions == self.instructions else self.model_copy(update={"instructions": instructions})

    def openai(self) -> list[dict[str, Any]]:
        return [t.openai() for t in self.tools]

    @classmethod
    def from_openai(cls, tools: list[dict[str, Any]], instructions: str = "") -> "Toolset":
        """Read an OpenAI-style ``tools`` list (``{"type": "function", "function": {...}}``)."""
        specs = []
        for i, entry in enumerate(tools):
            fn = entry.get("function", entry)
            if "name" not in fn:
                raise ValueError(f"tools[{i}] has no function name")
            specs.append(
                ToolSpec(
                    name=fn["name"],
                    description=fn.get("description", ""),
                    parameters=fn.get("parameters") or {"type": "object", "properties": {}},
                )
            )
        return cls(tools=tuple(specs), instructions=instructions)


def _canonical_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return sorted((t.model_dump() for t in tools), key=lambda d: d["name"])


def _digest(value: Any) -> str:
    canon = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


class ToolCall(BaseModel):
    """A call the model made (or the expert replays): tool name plus an arguments object."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Tool name."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Arguments as parsed JSON."""
    id: str | None = None
    """Call id where the protocol has one (OpenAI ``tool_calls[].id``)."""
