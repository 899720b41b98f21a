"""Mistral dialect: ``[TOOL_CALLS]`` followed by a JSON list of calls, or by ``NAME{json}``.

Mistral 7B v0.3 / Mixtral / Nemo (tokenizer v3) write ``[TOOL_CALLS][{"name": ..., "arguments":
{...}}, ...]``; newer models (tokenizer v11+: Mistral Small 3.2, Magistral, Devstral) write
``[TOOL_CALLS]NAME[ARGS]{json}``, one marker per call, and some builds drop ``[ARGS]`` or add
``[CALL_ID]id``. Both are read; calls render in the list form. Tools are shown in
``[AVAILABLE_TOOLS]`` and results go back in ``[TOOL_RESULTS]`` blocks.
"""

from __future__ import annotations

import json
import re

from trajforge.parse.base import Dialect, ParseResult
from trajforge.parse.limits import clip
from trajforge.parse.scan import (
    add_call, join_text, load_string_arguments, malformed, no_call, read_json_at, shared_repair, truncated,
    with_instructions,
)
from trajforge.schema import Message, Repair, ToolCall, Toolset

MARKER = "[TOOL_CALLS]"
HINT = '[TOOL_CALLS][{"name": "function_name", "arguments": {"argument": "value"}}]'
_NAMED = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*(?:\[CALL_ID\][^\[{]*)?(?:\[ARGS\])?\s*")
_SPACE = re.compile(r"\s*")
_TAGS = ("[ARGS]", "[CALL_ID]")


class MistralDialect(Dialect):
    name = "mistral"
    markers = (MARKER, "[ARGS]", "[CALL_ID]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]")

    def system_prompt(self, toolset: Toolset, instructions: str = "") -> str:
        tools = json.dumps(toolset.openai(), ensure_ascii=False)
        return with_instructions(instructions, (
            f"[AVAILABLE_TOOLS]{tools}[/AVAILABLE_TOOLS]\n\n"
            f"To call tools, reply with {HINT}; list several calls to make them together."
        ))

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        body = json.dumps([{"name": c.name, "arguments": c.arguments} for c in calls], ensure_ascii=False)
        parts = [content.strip()] if content.strip() else []
        return "\n".join(parts + ([MARKER + body] if calls else []))

    def render_tool_results(self, results: list[Message]) -> str:
        return "\n".join(
            "[TOOL_RESULTS]" + json.dumps({"name": m.name, "content": m.content}, ensure_ascii=False)
            + "[/TOOL_RESULTS]" for m in results)

    def _parse(self, text: str, toolset: Toolset) -> ParseResult:
        result = ParseResult()
        if MARKER not in text:
            result.text = text.strip()
            result.errors.append(no_call(HINT))
            return result
        pieces, pos = [], 0
        while (start := text.find(MARKER, pos)) != -1:
            pieces.append(text[pos:start])
            pos = self._read_calls(text, start + len(MARKER), toolset, result)
        pieces.append(text[pos:])
        result.text = join_text(pieces)
        return result

    def _read_calls(self, text: str, pos: int, toolset: Toolset, result: ParseResult) -> int:
        """Read what follows one marker; returns where the surrounding text resumes.

        Positions only, never ``text[pos:]``: copying the rest of the text at every marker made a
        reply of many markers quadratic.
        """
        at = _SPACE.match(text, pos).end()
        if at == len(text):
            result.errors.append(truncated())
            return len(text)
        repairs: list[Repair] = []
        if text[at] in "[{":
            span = read_json_at(text, at, repairs)
            if span.truncated:
                self._salvage(text, at, toolset, result)
                return span.end
            items = span.value
            if isinstance(items, dict):
                items = [items]
                repairs.append(shared_repair("single_object", "call object not wrapped in a list"))
            if not isinstance(items, list) or not items:
                result.errors.append(malformed(HINT, "Tool calls are not a JSON list"))
                return span.end
            for item in items:
                self._add_item(item, toolset, result, list(repairs))
            return span.end
        named = _NAMED.match(text, at)
        if named is None:
            result.errors.append(malformed(HINT, "[TOOL_CALLS] is not followed by calls"))
            return at
        tail = text[named.end():] if len(text) - named.end() <= max(map(len, _TAGS)) else None
        if tail is not None and (not tail or any(tag.startswith(tail) for tag in _TAGS)):
            result.errors.append(truncated())
            return len(text)
        if text[named.end()] != "{":
            result.errors.append(malformed(HINT, f"No JSON arguments after {clip(named.group(1))!r}"))
            return at  # what followed the marker stays visible as text
        span = read_json_at(text, named.end(), repairs)
        if span.truncated:
            result.errors.append(truncated())
        elif not isinstance(span.value, dict):
            result.errors.append(malformed(HINT, "Tool call arguments are not a JSON object"))
        else:
            add_call(result, named.group(1), span.value, toolset, repairs)
        return span.end

    @staticmethod
    def _add_item(item, toolset: Toolset, result: ParseResult, repairs: list[Repair]) -> None:
        if not isinstance(item, dict):
            result.errors.append(malformed(HINT, "Tool call is not a JSON object"))
            return
        args = item.get("arguments", item.get("parameters"))
        if isinstance(args, str):
            args = load_string_arguments(args, repairs)
            if args is None:
                result.errors.append(malformed(HINT, "Tool call arguments are not JSON"))
                return
        add_call(result, item.get("name"), args, toolset, repairs)

    def _salvage(self, text: str, at: int, toolset: Toolset, result: ParseResult) -> None:
        """A list cut off at the end of the text: keep the calls completed before the cut."""
        pos = at + 1 if text[at] == "[" else at
        while (start := text.find("{", pos)) != -1 and not text[pos:start].strip(" \t\n,"):
            repairs: list[Repair] = []
            span = read_json_at(text, start, repairs)
            if span.truncated:
                break
            self._add_item(span.value, toolset, result, repairs)
            pos = span.end
        result.errors.append(truncated())
