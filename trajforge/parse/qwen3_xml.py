"""Qwen3-Coder XML dialect: ``<tool_call><function=NAME><parameter=K>V</parameter></function></tool_call>``.

Parameter values are raw text, so their type comes from the tool's schema: string parameters keep
the text as written (one newline after the opening tag and one before the closing tag belong to
the format and are dropped); every other type is read as JSON. Plain JSON (``3``, ``true``,
``["a"]``) is the canonical form and is not a repair; Python literals (``True``, ``'a'``) and
damaged JSON are converted and recorded. A value cannot contain ``</parameter>`` — the format has
no escape for it.

A missing ``</tool_call>`` (or ``<tool_call>`` before a bare ``<function=``) is repaired; a call
whose ``</function>`` never came before the text ended is ``truncated``.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from trajforge.parse.base import Dialect, ParseResult
from trajforge.parse.limits import clip
from trajforge.parse.scan import (
    add_call, compact_tools, join_text, load_json, malformed, no_call, shared_repair, truncated,
    with_instructions,
)
from trajforge.schema import Message, Repair, ToolCall, Toolset

HINT = "<tool_call>\n<function=NAME>\n<parameter=ARG>\nvalue\n</parameter>\n</function>\n</tool_call>"
_BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|(?=<tool_call>)|\Z)", re.S)
_BARE = re.compile(r"<function=.*?(</function>|(?=<function=)|\Z)", re.S)
# A name stops at '<' too: otherwise each of many "<function=" without '>' scans to the end of the
# line, which is quadratic on a long line of them.
_FUNC = re.compile(r"<function=([^>\n<]*)>(.*?)(</function>|\Z)", re.S)
_PARAM = re.compile(r"<parameter=([^>\n<]*)>(.*?)(</parameter>|(?=<parameter=)|\Z)", re.S)


def _types(schema: dict[str, Any]) -> set[str]:
    kind = schema.get("type")
    return set(kind) if isinstance(kind, list) else ({kind} if kind else set())


def convert_value(raw: str, schema: dict[str, Any]) -> tuple[Any, Repair | None]:
    """Schema-typed value of one parameter's raw text, and the repair if it was not canonical."""
    kinds = _types(schema)
    if "string" in kinds or (not kinds and not schema.get("anyOf")):
        return raw, None
    text = raw.strip()
    try:
        return json.loads(text), None
    except RecursionError:
        return raw, None  # nested too deep to read: left as text, validation rejects it
    except ValueError:  # JSONDecodeError, or an integer past the int-string limit
        pass
    try:
        value = ast.literal_eval(text)  # literals only: True, None, 'single quoted'
        return value, Repair(kind="python_literal", detail=text[:80])
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    repairs: list[Repair] = []
    value = load_json(text, repairs)
    if value is None:
        return raw, None  # left as text: validation names the parameter and the expected type
    return value, repairs[0]


def _strip_one_newline(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _render_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class Qwen3XMLDialect(Dialect):
    name = "qwen3_xml"
    markers = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>")

    def system_prompt(self, toolset: Toolset, instructions: str = "") -> str:
        return with_instructions(instructions, (
            "# Tools\n\nYou have access to the following functions:\n\n"
            f"<tools>\n{compact_tools(toolset)}\n</tools>\n\n"
            "If you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
            "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
            "</parameter>\n</function>\n</tool_call>\n\n"
            "Reminder:\n- Function calls MUST follow the specified format\n"
            "- Required parameters MUST be specified\n- You may call several functions, one "
            "<tool_call> block each"
        ))

    def render_call(self, call: ToolCall) -> str:
        params = "".join(f"<parameter={k}>\n{_render_value(v)}\n</parameter>\n"
                         for k, v in call.arguments.items())
        return f"<tool_call>\n<function={call.name}>\n{params}</function>\n</tool_call>"

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        parts = [content.strip()] if content.strip() else []
        return "\n".join(parts + [self.render_call(c) for c in calls])

    def render_tool_results(self, results: list[Message]) -> str:
        return "\n".join(f"<tool_response>\n{m.content}\n</tool_response>" for m in results)

    def _parse(self, text: str, toolset: Toolset) -> ParseResult:
        result = ParseResult()
        if "<tool_call>" in text:
            blocks = [(m.group(1), bool(m.group(2)), not m.group(2) and m.end() == len(text), m.span())
                      for m in _BLOCK.finditer(text)]
            wrapper_repair = None
        elif "<function=" in text:  # Qwen3-Coder sometimes drops the wrapper
            blocks = [(m.group(0), True, not m.group(1) and m.end() == len(text), m.span())
                      for m in _BARE.finditer(text)]
            wrapper_repair = shared_repair("missing_tag", "<function=...> without <tool_call>")
        else:
            result.text = text.strip()
            result.errors.append(no_call(HINT))
            return result
        pieces, last = [], 0
        for body, closed, at_end, (start, end) in blocks:  # at_end: the text stopped inside the call
            pieces.append(text[last:start])
            last = end
            repairs = [wrapper_repair] if wrapper_repair else []
            self._parse_block(body, closed, at_end, toolset, result, repairs)
        pieces.append(text[last:])
        result.text = join_text(pieces)
        return result

    def _parse_block(self, body: str, closed: bool, at_end: bool, toolset: Toolset, result: ParseResult,
                     repairs: list[Repair]) -> None:
        func = _FUNC.search(body)
        if func is None:
            if at_end and (not body.strip() or "<function=" in body or "<function=".startswith(body.strip())):
                result.errors.append(truncated())
            else:
                result.errors.append(malformed(HINT, "Tool call has no <function=NAME> tag"))
            return
        if not func.group(3):
            if at_end:
                result.errors.append(truncated())
                return
            repairs.append(shared_repair("unclosed_tag", "missing </function>"))
        if not closed:
            repairs.append(shared_repair("unclosed_tag", "missing </tool_call>"))
        spec = toolset.get(func.group(1).strip())
        props = spec.parameters.get("properties", {}) if spec else {}
        arguments: dict[str, Any] = {}
        for p in _PARAM.finditer(func.group(2)):
            key = p.group(1).strip()
            if not p.group(3):
                repairs.append(shared_repair("unclosed_tag", f"missing </parameter> after {clip(key)}"))
            value, repair = convert_value(_strip_one_newline(p.group(2)), props.get(key, {"type": "string"}))
            if repair:
                repairs.append(repair.model_copy(update={"detail": f"{clip(key)}: {repair.detail}"}))
            arguments[key] = value
        add_call(result, func.group(1).strip(), arguments, toolset, repairs)
