"""ReAct dialect: ``Thought: ...`` / ``Action: NAME`` / ``Action Input: {json}`` / ``Observation: ...``.

For models prompted rather than trained for tools. Each ``Action:`` line starts a call and must be
followed by ``Action Input:`` with a JSON object (a ```json fence around it is tolerated); several
Action blocks in one turn are several calls. A bare one-line input for a tool with a single string
parameter is accepted and recorded (the LangChain habit). ``Thought:`` labels are dropped from
``ParseResult.text``; an ``Observation:`` the model invents itself is left in the text, never fed
to a tool.
"""

from __future__ import annotations

import json
import re

from trajforge.parse.base import Dialect, ParseResult
from trajforge.parse.scan import (
    add_call, compact_tools, join_text, malformed, no_call, read_json_at, shared_repair, truncated,
    with_instructions,
)
from trajforge.schema import Message, Repair, ToolCall, Toolset

HINT = 'Action: NAME\\nAction Input: {"argument": "value"}'
# The name is the rest of the line, stripped in Python: a lazy ``(.*?)[ \t]*$`` rescans every
# run of spaces at each step, which is quadratic on a long line of them.
_ACTION = re.compile(r"^[ \t]*Action:(.*)$", re.M)
_INPUT = re.compile(r"\s*Action Input:\s*(?:```(?:json)?\s*)?")
_SPACE = re.compile(r"\s*")
_FENCE = re.compile(r"\s*```")
_INPUT_LABEL = "Action Input:"
_THOUGHT = re.compile(r"^[ \t]*Thought:[ \t]*", re.M)


class ReActDialect(Dialect):
    name = "react"

    def system_prompt(self, toolset: Toolset, instructions: str = "") -> str:
        return with_instructions(instructions, (
            f"You have access to the following tools (OpenAI function schemas):\n{compact_tools(toolset)}\n\n"
            "Use the following format:\n\nThought: think about what to do\n"
            f"Action: the tool to use, one of [{', '.join(toolset.names)}]\n"
            "Action Input: the tool's arguments as a JSON object\nObservation: the result of the action\n"
            "... (Thought/Action/Action Input/Observation can repeat; several Action blocks in one "
            "turn run together)"
        ))

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        parts = [f"Thought: {content.strip()}"] if content.strip() else []
        parts += [f"Action: {c.name}\nAction Input: {json.dumps(c.arguments, ensure_ascii=False)}"
                  for c in calls]
        return "\n".join(parts)

    def render_tool_results(self, results: list[Message]) -> str:
        return "\n".join(f"Observation: {m.content}" for m in results)

    def _parse(self, text: str, toolset: Toolset) -> ParseResult:
        result = ParseResult()
        pieces, pos, found = [], 0, False
        content_end = len(text.rstrip())
        while (m := _ACTION.search(text, pos)) is not None:
            found = True
            pieces.append(text[pos:m.start()])
            pos = self._read_action(text, m, content_end, toolset, result)
        pieces.append(text[pos:])
        result.text = join_text([_THOUGHT.sub("", p) for p in pieces])
        if not found:
            result.errors.append(no_call(HINT))
        return result

    def _read_action(self, text: str, action: re.Match, content_end: int, toolset: Toolset,
                     result: ParseResult) -> int:
        """Read one Action block; returns where the surrounding text resumes. ``content_end``: where
        the text ends without its trailing whitespace."""
        name = action.group(1).strip(" \t").strip("`'\" ")
        inp = _INPUT.match(text, action.end())
        if inp is None:
            # Cut off before the input: all that is left is the start of the label. Measured by
            # positions, so many Actions without input do not copy the rest of the text each.
            left = _SPACE.match(text, action.end()).end()
            cut = left >= content_end or (content_end - left <= len(_INPUT_LABEL)
                                          and _INPUT_LABEL.startswith(text[left:content_end]))
            result.errors.append(truncated() if cut else malformed(HINT, "Action without Action Input"))
            return len(text) if cut else action.end()
        at = inp.end()
        if at == len(text):
            result.errors.append(truncated())
            return at
        repairs: list[Repair] = []
        if text[at] not in "{[":
            line_end = text.find("\n", at)
            end = len(text) if line_end == -1 else line_end
            self._bare_input(name, text[at:end].strip(), toolset, result)
            return end
        span = read_json_at(text, at, repairs)
        if span.truncated:
            result.errors.append(truncated())
        elif not isinstance(span.value, dict):
            result.errors.append(malformed(HINT, "Action Input is not a JSON object"))
        else:
            add_call(result, name, span.value, toolset, repairs)
        fence = _FENCE.match(text, span.end)
        return fence.end() if fence else span.end

    @staticmethod
    def _bare_input(name: str, value: str, toolset: Toolset, result: ParseResult) -> None:
        spec = toolset.get(name)
        props = spec.parameters.get("properties", {}) if spec else {}
        if spec is not None and len(props) == 1 and next(iter(props.values())).get("type") == "string":
            key = next(iter(props))
            add_call(result, name, {key: value}, toolset,
                     [shared_repair("bare_input", f"{name}: plain text taken as {key!r}")])
            return
        if spec is None:
            add_call(result, name, {}, toolset, [])  # unknown_tool, with the closest-name hint
            return
        result.errors.append(malformed(HINT, "Action Input is not a JSON object"))
