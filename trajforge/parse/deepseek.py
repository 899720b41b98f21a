"""DeepSeek V3 dialect: calls between full-width special tokens, arguments in a ```json fence.

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    {"arg": "value"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

(``｜`` is U+FF5C and ``▁`` U+2581, as in the tokenizer.) The V3.1 form
``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜>`` is read too. The arguments are
read with ``raw_decode`` from the first ``{``, never by searching for the closing fence, so a value
may itself contain triple backticks. Results go back in ``<｜tool▁outputs▁begin｜>`` blocks.
"""

from __future__ import annotations

import json
import re

from trajforge.parse.base import Dialect, ParseResult
from trajforge.parse.scan import (
    Finder, add_call, compact_tools, join_text, malformed, no_call, read_block, read_json_at, shared_repair,
    truncated, with_instructions,
)
from trajforge.schema import Message, Repair, ToolCall, Toolset

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
OUTPUTS_BEGIN, OUTPUTS_END = "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>"
OUTPUT_BEGIN, OUTPUT_END = "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>"
HINT = f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}NAME\\n```json\\n{{...}}\\n```{CALL_END}{CALLS_END}"
_NAME = re.compile(r"\s*([^\s`{]+)\s*(?:```(?:json)?)?\s*")


class DeepSeekDialect(Dialect):
    name = "deepseek"
    markers = (CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP, OUTPUTS_BEGIN, OUTPUTS_END, OUTPUT_BEGIN, OUTPUT_END)

    def system_prompt(self, toolset: Toolset, instructions: str = "") -> str:
        return with_instructions(instructions, (
            "## Tools\nYou have access to the following tools (OpenAI function schemas, one per line):\n"
            f"{compact_tools(toolset)}\n\nTo call tools, reply with\n"
            f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}NAME\n```json\n{{\"argument\": \"value\"}}\n```"
            f"{CALL_END}{CALLS_END}\nwith one {CALL_BEGIN}...{CALL_END} block per call."
        ))

    def render_call(self, call: ToolCall) -> str:
        args = json.dumps(call.arguments, ensure_ascii=False)
        return f"{CALL_BEGIN}function{SEP}{call.name}\n```json\n{args}\n```{CALL_END}"

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        parts = [content.strip()] if content.strip() else []
        if calls:
            parts.append(CALLS_BEGIN + "\n".join(self.render_call(c) for c in calls) + CALLS_END)
        return "\n".join(parts)

    def render_tool_results(self, results: list[Message]) -> str:
        body = "\n".join(f"{OUTPUT_BEGIN}{m.content}{OUTPUT_END}" for m in results)
        return f"{OUTPUTS_BEGIN}{body}{OUTPUTS_END}"

    def _parse(self, text: str, toolset: Toolset) -> ParseResult:
        result = ParseResult()
        if CALL_BEGIN not in text:
            result.text = join_text(re.split(f"{CALLS_BEGIN}|{CALLS_END}", text))
            if CALLS_BEGIN not in text:
                result.errors.append(no_call(HINT))
            elif CALLS_END in text:
                result.errors.append(malformed(HINT, "No <｜tool▁call▁begin｜> inside the tool calls"))
            else:
                result.errors.append(truncated())
            return result
        finder = Finder(text)
        pieces, pos = [], 0
        while (start := text.find(CALL_BEGIN, pos)) != -1:
            pieces.append(text[pos:start])
            block = read_block(finder, start + len(CALL_BEGIN), CALL_END, (CALL_BEGIN, CALLS_END))
            self._parse_block(block.body, block.closed, toolset, result)
            pos = block.end
        pieces.append(text[pos:])
        result.text = join_text(re.split(f"{CALLS_BEGIN}|{CALLS_END}", "".join(pieces)))
        return result

    def _parse_block(self, body: str, closed: bool, toolset: Toolset, result: ParseResult) -> None:
        repairs: list[Repair] = []
        head, sep, rest = body.partition(SEP)
        if not sep:
            result.errors.append(truncated() if not closed else malformed(HINT, "Tool call has no <｜tool▁sep｜>"))
            return
        if rest.lstrip().startswith("{"):  # V3.1: NAME<｜tool▁sep｜>{json}
            name, at = head.strip(), len(rest) - len(rest.lstrip())
        else:  # V3: TYPE<｜tool▁sep｜>NAME\n```json\n{json}\n```
            named = _NAME.match(rest)
            if named is None or named.end() == len(rest):
                result.errors.append(truncated() if not closed else malformed(HINT, "Tool call has no arguments"))
                return
            name, at = named.group(1), named.end()
        if at >= len(rest) or rest[at] != "{":
            result.errors.append(truncated() if not closed and at >= len(rest)
                                 else malformed(HINT, "Tool call arguments are not a JSON object"))
            return
        span = read_json_at(rest, at, repairs)
        if span.truncated:
            result.errors.append(truncated())
            return
        if not closed:
            repairs.append(shared_repair("unclosed_tag", "missing <｜tool▁call▁end｜>"))
        if not isinstance(span.value, dict):
            result.errors.append(malformed(HINT, "Tool call arguments are not a JSON object"))
            return
        add_call(result, name, span.value, toolset, repairs)
