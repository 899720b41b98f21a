"""Hermes / Qwen2.5 dialect: ``<tools>`` in the system prompt, ``<tool_call>{json}</tool_call>``
calls, ``<tool_response>`` results.

Parsing is tolerant: a missing closing tag at the end of the text, single quotes, trailing commas
and other JSON damage are repaired with json-repair and recorded, so metrics can report strict and
repaired validity apart. A call cut off mid-way (unbalanced braces at end of text) is a typed
``truncated`` error, not a repair: guessing the rest would dispatch arguments the model never wrote.
A block ends at the first ``</tool_call>`` after its JSON object, so a value may contain the tags.
A block that is exactly one strict JSON object between the tags is decoded once, on a fast path;
anything else takes the tolerant path, with the same outcome for the blocks both could read.
"""

from __future__ import annotations

import json
import re

from trajforge.parse.base import Dialect, ParseResult
from trajforge.parse.scan import load_json, read_block
from trajforge.parse.validate import validate_call
from trajforge.schema import CallError, Message, Repair, ToolCall, Toolset

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_DECODER = json.JSONDecoder()
_json_ws = re.compile(r"[ \t\n\r]*").match


def _compact_tool(spec) -> str:
    return json.dumps(spec.openai(), separators=(", ", ": "), ensure_ascii=False)


def _balanced(text: str) -> bool:
    """True when braces/brackets close (ignoring those inside strings)."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            esc = (ch == "\\") and not esc
            if ch == '"' and not esc:
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return depth <= 0 and not in_str


class HermesDialect(Dialect):
    name = "hermes"

    def system_prompt(self, toolset: Toolset, instructions: str = "") -> str:
        tools = "\n".join(_compact_tool(t) for t in toolset.tools)
        head = (instructions.strip() + "\n\n") if instructions.strip() else ""
        return (
            f"{head}# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            f"You are provided with function signatures within <tools></tools> XML tags:\n"
            f"<tools>\n{tools}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        )

    def render_call(self, call: ToolCall) -> str:
        body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
        return f"{OPEN}\n{body}\n{CLOSE}"

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        parts = [content.strip()] if content.strip() else []
        parts += [self.render_call(c) for c in calls]
        return "\n".join(parts)

    def render_tool_results(self, results: list[Message]) -> str:
        return "\n".join(f"<tool_response>\n{m.content}\n</tool_response>" for m in results)

    def parse(self, text: str, toolset: Toolset) -> ParseResult:
        result = ParseResult()
        if OPEN not in text:
            result.text = text.strip()
            result.errors.append(CallError(
                kind="no_call",
                message=("No tool call found. Call a tool with <tool_call>{\"name\": ..., "
                         "\"arguments\": {...}}</tool_call>."),
            ))
            return result
        pieces, pos = [], 0
        while (start := text.find(OPEN, pos)) != -1:
            pieces.append(text[pos:start])
            pos = self._fast_block(text, start + len(OPEN), toolset, result)
            if pos is None:  # anything but clean JSON between the tags: the tolerant path
                block = read_block(text, start + len(OPEN), CLOSE, (OPEN,))
                self._parse_block(block.body.strip(), block.closed, toolset, result)
                pos = block.end
        pieces.append(text[pos:])
        result.text = "".join(pieces).strip()
        return result

    def _fast_block(self, text: str, at: int, toolset: Toolset, result: ParseResult) -> int | None:
        """The common case in one pass: whitespace, one strict JSON object, whitespace, ``</tool_call>``.

        Decodes the object once, where ``read_block`` + ``json.loads`` would decode it twice; the
        outcome is the one the tolerant path gives for such a block. Returns where the text resumes,
        or None (nothing recorded) for any other shape.
        """
        if not text.startswith("{", at):
            at = _json_ws(text, at).end()
            if not text.startswith("{", at):
                return None
        try:
            obj, end = _DECODER.raw_decode(text, at)
        except (json.JSONDecodeError, RecursionError):
            return None
        if not text.startswith(CLOSE, end):
            end = _json_ws(text, end).end()
            if not text.startswith(CLOSE, end):
                return None
        self._accept(obj, [], toolset, result)
        return end + len(CLOSE)

    def _parse_block(self, body: str, closed: bool, toolset: Toolset, result: ParseResult) -> None:
        if not closed and not _balanced(body):
            result.errors.append(CallError(
                kind="truncated", message="The tool call was cut off before it was complete."))
            return
        repairs: list[Repair] = []
        if not closed:
            repairs.append(Repair(kind="unclosed_tag", detail="missing </tool_call>"))
        self._accept(self._load(body, repairs), repairs, toolset, result)

    def _accept(self, obj, repairs: list[Repair], toolset: Toolset, result: ParseResult) -> None:
        if not isinstance(obj, dict):
            result.errors.append(CallError(
                kind="malformed",
                message='Tool call is not valid JSON. Use {"name": "...", "arguments": {...}}.'))
            return
        args = obj.get("arguments", obj.get("parameters"))
        if isinstance(args, str):  # OpenAI-style stringified arguments
            args = self._load(args, repairs)
            repairs.append(Repair(kind="string_arguments", detail="arguments given as a JSON string"))
        call, error, arg_repairs = validate_call(obj.get("name"), args, toolset)
        if error:
            result.errors.append(error)
            return
        result.calls.append(call)
        if repairs or arg_repairs:
            result.repairs.extend(repairs + arg_repairs)

    @staticmethod
    def _load(body: str, repairs: list[Repair]):
        return load_json(body, repairs)
