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
from typing import NamedTuple

from trajforge.parse.base import Dialect, ParseResult
from trajforge.parse.scan import (
    DECODER, NEAR, Finder, call_error, decode_at, load_json, load_string_arguments, read_block, shared_repair,
    string_end, truncated,
)
from trajforge.parse.validate import surely_valid_call, validate_call
from trajforge.schema import CallError, Message, Repair, ToolCall, Toolset

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_NL_CLOSE = "\n" + CLOSE
_json_ws = re.compile(r"[ \t\n\r]*").match


def _compact_tool(spec) -> str:
    return json.dumps(spec.openai(), separators=(", ", ": "), ensure_ascii=False)


# A run of openers, a run of closers, a quote, or a run of anything else: brackets are counted in C.
_BRACKETS = re.compile(r'[{\[]+|[}\]]+|"|[^"{}\[\]]+')


def _balanced(text: str) -> bool:
    """True when braces/brackets close (ignoring those inside strings)."""
    depth, pos = 0, 0
    while (m := _BRACKETS.match(text, pos)) is not None:
        token, pos = m.group(), m.end()
        if token == '"':
            end = string_end(text, pos, '"')
            if end is None:
                return False  # the text ends inside a string
            pos = end
        elif token[0] in "{[":
            depth += len(token)
        elif token[0] in "}]":
            depth -= len(token)
    return depth <= 0


class HermesDialect(Dialect):
    name = "hermes"
    markers = (OPEN, CLOSE, "<tool_response>", "</tool_response>", "<tools>", "</tools>")

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

    def _parse(self, text: str, toolset: Toolset) -> ParseResult:
        if OPEN not in text:
            return _new_result({"text": text.strip(), "errors": [call_error("no_call", (
                "No tool call found. Call a tool with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>."))]})
        found = _Found([], [], [])
        finder = None  # made when a block needs the tolerant path (most replies never do)
        pieces, pos = [], 0
        while (start := text.find(OPEN, pos)) != -1:
            pieces.append(text[pos:start])
            fast = _fast_block(text, start + len(OPEN))
            if fast is not None and fast is not _UNREADABLE:
                obj, pos = fast
                call = surely_valid_call(obj.get("name"), obj.get("arguments"), toolset) \
                    if type(obj) is dict else None
                if call is not None:
                    found.calls.append(call)
                else:  # anything else about it (string arguments, coercion, errors): the full path
                    self._accept(obj, [], toolset, found)
            else:  # anything but clean JSON between the tags: the tolerant path
                finder = finder or Finder(text)
                block = read_block(finder, start + len(OPEN), CLOSE, (OPEN,), json_first=fast is None)
                self._parse_block(block.body.strip(), block.closed, toolset, found)
                pos = block.end
        pieces.append(text[pos:])
        # Built once, complete: cheaper than filling a ParseResult field by field.
        return _new_result({"text": "".join(pieces).strip(), "calls": found.calls, "errors": found.errors,
                            "repairs": found.repairs})

    def _parse_block(self, body: str, closed: bool, toolset: Toolset, found: "_Found") -> None:
        if not closed and not _balanced(body):
            found.errors.append(truncated())
            return
        repairs: list[Repair] = []
        if not closed:
            repairs.append(shared_repair("unclosed_tag", "missing </tool_call>"))
        self._accept(self._load(body, repairs), repairs, toolset, found)

    def _accept(self, obj, repairs: list[Repair], toolset: Toolset, found: "_Found") -> None:
        if not isinstance(obj, dict):
            found.errors.append(call_error(
                "malformed", 'Tool call is not valid JSON. Use {"name": "...", "arguments": {...}}.'))
            return
        args = obj["arguments"] if "arguments" in obj else obj.get("parameters")
        if isinstance(args, str):  # OpenAI-style stringified arguments
            args = load_string_arguments(args, repairs)
            if args is None:
                found.errors.append(call_error(
                    "malformed", 'Tool call arguments are not JSON. Use {"name": "...", "arguments": {...}}.'))
                return
        call, error, arg_repairs = validate_call(obj.get("name"), args, toolset)
        if error:
            found.errors.append(error)
            return
        found.calls.append(call)
        if repairs or arg_repairs:
            found.repairs.extend(repairs + arg_repairs)

    @staticmethod
    def _load(body: str, repairs: list[Repair]):
        return load_json(body, repairs)


class _Found(NamedTuple):
    """What a parse has accepted and rejected so far."""

    calls: list[ToolCall]
    errors: list[CallError]
    repairs: list[Repair]


_new_result = ParseResult.__pydantic_validator__.validate_python


_UNREADABLE = "unreadable"
"""``_fast_block``'s answer when the block opens with a ``{`` that does not decode."""


def _fast_block(text: str, at: int) -> tuple[object, int] | str | None:
    """The common case in one pass: whitespace, one strict JSON object, whitespace, ``</tool_call>``.

    Decodes the object once, where ``read_block`` + ``json.loads`` would decode it twice; the
    outcome is the one the tolerant path gives for such a block. Returns the object and where the
    text resumes; ``_UNREADABLE`` when the block's first ``{`` does not decode (the tolerant path
    then need not try again); None for any other shape. The rendered layout (one newline each
    side) is checked first, without a regex.
    """
    if text.startswith("\n{", at):
        at += 1
    elif not text.startswith("{", at):
        at = _json_ws(text, at).end()
        if not text.startswith("{", at):
            return None
    try:
        obj, end = DECODER.raw_decode(text, at) if at < NEAR else decode_at(text, at)
    except (ValueError, RecursionError):  # damaged, too deep, or an integer past the digit limit
        return _UNREADABLE
    if text.startswith(_NL_CLOSE, end):
        return obj, end + len(_NL_CLOSE)
    if not text.startswith(CLOSE, end):
        end = _json_ws(text, end).end()
        if not text.startswith(CLOSE, end):
            return None
    return obj, end + len(CLOSE)
