"""Pythonic dialect (Llama 3.2 / Llama 4 style): ``[f(a=1, b="x"), g()]``.

The call list is read with :mod:`ast` and every keyword value with ``ast.literal_eval``, so the
text is never executed: a name, an attribute or an expression as a value is a ``malformed`` call,
not an evaluation. JSON spellings of constants (``true``, ``false``, ``null``) are accepted and
recorded as a repair. A list that starts but never closes before the text ends is ``truncated``.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from trajforge.parse.base import Dialect, ParseResult
from trajforge.parse.limits import clip
from trajforge.parse.scan import (
    add_call, join_text, malformed, match_close, no_call, truncated, with_instructions,
)
from trajforge.schema import Message, Repair, ToolCall, Toolset

HINT = "[func_name1(param_name1=value1, param_name2=value2), func_name2(param=value)]"
_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
_CALL = re.compile(r"[\s,]*[A-Za-z_][\w.]*\s*\(")
_JSON_CONSTANTS = {"true": True, "false": False, "null": None}


class _NotLiteral(ValueError):
    pass


def _literal(node: ast.expr, repairs: list[Repair], where: str) -> Any:
    """``ast.literal_eval`` on one value node; bare true/false/null read as JSON constants."""
    if isinstance(node, ast.Name) and node.id in _JSON_CONSTANTS:
        repairs.append(Repair(kind="json_literal", detail=f"{where}: {node.id}"))
        return _JSON_CONSTANTS[node.id]
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as e:
        raise _NotLiteral(f"{where} is not a literal value") from e
    return _jsonable(value, repairs, where)


def _jsonable(value: Any, repairs: list[Repair], where: str) -> Any:
    """Tuples and sets become lists (JSON has only arrays), recorded."""
    if isinstance(value, (tuple, set)):
        repairs.append(Repair(kind="python_literal", detail=f"{where}: {type(value).__name__} -> list"))
        value = list(value)
    if isinstance(value, list):
        return [_jsonable(v, repairs, where) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v, repairs, where) for k, v in value.items()}
    return value


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` of a call's function, walked in a loop: ``ast.unparse`` recurses once per dot and
    a model can write thousands of them."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.append(node.id if isinstance(node, ast.Name) else "?")
    return ".".join(reversed(parts))


class PythonicDialect(Dialect):
    name = "pythonic"

    def system_prompt(self, toolset: Toolset, instructions: str = "") -> str:
        tools = json.dumps([t.model_dump() for t in toolset.tools], ensure_ascii=False)
        return with_instructions(instructions, (
            "You are an expert in composing functions. You are given a question and a set of possible "
            "functions. Based on the question, you will need to make one or more function/tool calls "
            "to achieve the purpose.\n\nIf you decide to invoke any of the function(s), you MUST put "
            f"it in the format of {HINT}\n\nHere is a list of functions in JSON format that you can "
            f"invoke.\n\n{tools}"
        ))

    def render_call(self, call: ToolCall) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())
        return f"{call.name}({args})"

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        parts = [content.strip()] if content.strip() else []
        if calls:
            parts.append("[" + ", ".join(self.render_call(c) for c in calls) + "]")
        return "\n".join(parts)

    def render_tool_results(self, results: list[Message]) -> str:
        return "\n".join(m.content for m in results)

    def _parse(self, text: str, toolset: Toolset) -> ParseResult:
        result = ParseResult()
        pieces, pos, found = [], 0, False
        while (m := _START.search(text, pos)) is not None:
            found = True
            pieces.append(text[pos:m.start()])
            end = match_close(text, m.start())
            if end is None:
                self._salvage(text, m.start(), toolset, result)
                pos = len(text)
                break
            self._read_list(text[m.start():end], toolset, result)
            pos = end
        pieces.append(text[pos:])
        result.text = join_text(pieces)
        if not found:
            result.errors.append(no_call(HINT))
        return result

    def _salvage(self, text: str, start: int, toolset: Toolset, result: ParseResult) -> None:
        """A list cut off at the end of the text: keep the calls completed before the cut."""
        pos = start + 1
        while (m := _CALL.match(text, pos)) is not None:
            end = match_close(text, m.end() - 1)
            if end is None:
                break
            self._read_list("[" + text[m.start():end].strip(" \t\n,") + "]", toolset, result)
            pos = end
        result.errors.append(truncated())

    def _read_list(self, source: str, toolset: Toolset, result: ParseResult) -> None:
        try:
            tree = ast.parse(source.strip(), mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            result.errors.append(malformed(HINT, "Tool calls are not a valid Python list of calls"))
            return
        if not isinstance(tree, ast.List):
            result.errors.append(malformed(HINT, "Tool calls must be a list"))
            return
        for node in tree.elts:
            if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
                result.errors.append(malformed(HINT, "Each list item must be a function call"))
                continue
            name = _dotted(node.func)
            if node.args or any(k.arg is None for k in node.keywords):
                result.errors.append(malformed(HINT, f"{clip(name)}: pass every argument by keyword"))
                continue
            repairs: list[Repair] = []
            try:
                args = {k.arg: _literal(k.value, repairs, clip(f"{name}.{k.arg}")) for k in node.keywords}
            except _NotLiteral as e:
                result.errors.append(malformed(HINT, f"{e}; use literal values only"))
                continue
            add_call(result, name, args, toolset, repairs)
