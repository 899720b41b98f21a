"""Llama 3.x JSON dialect: ``{"name": ..., "parameters": {...}}`` objects in plain text.

Llama 3.1-3.3 answer a custom-tool request with bare JSON, optionally after ``<|python_tag|>``;
several calls are separated by ``;`` or newlines. A call starts at a ``{`` followed by a ``"name"``
key (so JSON the model merely talks about is left as text), and ``raw_decode`` reads exactly one
object from there: a value may contain ``}`` or ``;`` without ending the call. ``"arguments"`` is
accepted for ``"parameters"``.
"""

from __future__ import annotations

import json
import re

from trajforge.parse.base import Dialect, ParseResult
from trajforge.parse.scan import (
    add_call, join_text, load_string_arguments, malformed, no_call, read_json_at, truncated, with_instructions,
)
from trajforge.schema import Message, Repair, ToolCall, Toolset

PYTHON_TAG = "<|python_tag|>"
HINT = '{"name": "function_name", "parameters": {"argument": "value"}}'
# A call opens with its "name" key, or with "type" (Llama 3.2 often writes {"type": "function", ...}).
_START = re.compile(r"\{\s*[\"'](?:name|type)[\"']\s*:")
_SEPARATORS = re.compile(r"[\s;]*")


class Llama3JSONDialect(Dialect):
    name = "llama3_json"
    markers = (PYTHON_TAG,)

    def system_prompt(self, toolset: Toolset, instructions: str = "") -> str:
        tools = "\n\n".join(json.dumps(t.openai(), indent=4, ensure_ascii=False) for t in toolset.tools)
        return with_instructions(instructions, (
            "Given the following functions, please respond with a JSON for a function call with its "
            "proper arguments that best answers the given prompt.\n\n"
            f"Respond in the format {HINT}. Do not use variables. To make several calls, put one "
            f"JSON object per line.\n\n{tools}"
        ))

    def render_call(self, call: ToolCall) -> str:
        return json.dumps({"name": call.name, "parameters": call.arguments}, ensure_ascii=False)

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        parts = [content.strip()] if content.strip() else []
        return "\n".join(parts + [self.render_call(c) for c in calls])

    def render_tool_results(self, results: list[Message]) -> str:
        # Llama's ipython turn carries the raw output; several results go one per line.
        return "\n".join(m.content for m in results)

    def _parse(self, text: str, toolset: Toolset) -> ParseResult:
        result = ParseResult()
        tagged = PYTHON_TAG in text  # dropped from the text pieces only: a value may contain it
        pieces, pos, search_from, found = [], 0, 0, False
        while (m := _START.search(text, search_from)) is not None:
            repairs: list[Repair] = []
            span = read_json_at(text, m.start(), repairs)
            obj = span.value
            search_from = span.end
            if not span.truncated and isinstance(obj, dict) and "name" not in obj and "type" in obj:
                continue  # JSON that merely has a "type" key stays in the text
            pieces.append(text[pos:m.start()])
            found, pos = True, span.end
            if span.truncated:
                result.errors.append(truncated())
                break
            if not isinstance(obj, dict):
                result.errors.append(malformed(HINT, "Tool call is not valid JSON"))
                continue
            args = obj.get("parameters", obj.get("arguments"))
            if isinstance(args, str):  # stringified arguments, OpenAI habit
                args = load_string_arguments(args, repairs, "parameters given as a JSON string")
                if args is None:
                    result.errors.append(malformed(HINT, "Tool call parameters are not JSON"))
                    continue
            add_call(result, obj.get("name"), args, toolset, repairs)
            pos = search_from = _SEPARATORS.match(text, pos).end()
        pieces.append(text[pos:])
        result.text = join_text([p for piece in pieces for p in piece.split(PYTHON_TAG)])
        if not found:
            result.errors.append(
                malformed(HINT, f"{PYTHON_TAG} is not followed by a JSON call") if tagged else no_call(HINT))
        return result
