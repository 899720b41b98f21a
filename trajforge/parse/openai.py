"""OpenAI dialect: structured ``tool_calls`` in chat-completion responses, arguments as JSON strings.

Tools travel in the request's ``tools`` list, not in the system prompt; an assistant turn is a
message with ``tool_calls`` (``{"id", "type": "function", "function": {"name", "arguments"}}``,
``arguments`` a JSON *string*); each tool result is its own ``role: tool`` message carrying the
``tool_call_id`` it answers. This is what OpenAI, vLLM/SGLang with a tool parser, the DeepSeek API
and ``trajforge serve`` speak, so ``OpenAIPolicy`` and the harness read native calls here.

The dialect's text form is the JSON of a response, a choice, an assistant message or a bare
``tool_calls`` list (``trajforge parse --dialect openai`` reads any of them). Parsing is as tolerant
and as strict as the text dialects': an ``arguments`` string that is damaged JSON is repaired with
json-repair and recorded; one that stops before its closing brace — or a response whose JSON is cut
off inside a call, or ``finish_reason: "length"`` with an unfinished call — is ``truncated`` and
never completed by guessing; unknown tools and bad arguments are the usual typed errors.

Streaming: ``DeltaAccumulator`` assembles ``chat.completion.chunk`` deltas (content pieces, and
``tool_calls`` fragments keyed by ``index`` whose ``arguments`` arrive piece by piece) into the
message, which is then parsed exactly like a non-streamed one.

    dialect = get_dialect("openai")
    result = dialect.parse(response_json_text, toolset)          # or dialect.parse_message(msg, toolset)
    acc = DeltaAccumulator(); [acc.feed(chunk) for chunk in stream]; result = acc.finish(toolset)
"""

from __future__ import annotations

import json
import re
from typing import Any

from trajforge.parse.base import Dialect, ParseResult, few_errors, guarded, over_cap
from trajforge.parse.limits import MAX_REPLY_CHARS, clean_text
from trajforge.parse.scan import call_error, load_json, match_close, read_json_at, repair_json, string_end
from trajforge.parse.validate import validate_call
from trajforge.schema import CallError, Message, Repair, ToolCall, Toolset

SHAPE = '{"role": "assistant", "content": ..., "tool_calls": [{"id": ..., "type": "function", ' \
        '"function": {"name": ..., "arguments": "<JSON object as a string>"}}]}'
_TOOL_CALLS_KEY = re.compile(r'"tool_calls"\s*:\s*\[')
_BRACKET_OR_QUOTE = re.compile(r'[\[\]{}"]')
_MESSAGE_KEYS = {"role", "content", "tool_calls", "function_call"}
_UNCLOSED = Repair(kind="unclosed_json", detail="response JSON cut off after its complete calls")


def _error(kind: str, message: str, tool: str | None = None) -> CallError:
    return call_error(kind, message) if tool is None else CallError(kind=kind, message=message, tool=tool)


def _truncated(why: str = "The tool call was cut off before it was complete.") -> CallError:
    return _error("truncated", why)


def _content_text(content: Any) -> str:
    """Message content as clean text: a string, or the text parts of a content-parts list."""
    if isinstance(content, str):
        return clean_text(content)
    if isinstance(content, list):
        return clean_text("".join(p.get("text", "") for p in content
                                  if isinstance(p, dict) and isinstance(p.get("text", ""), str)))
    return ""


def _arguments(raw: Any, last_cut: bool, repairs: list[Repair]) -> tuple[Any, CallError | None]:
    """Decode one call's ``arguments`` field; (value, None) or (None, a truncated/malformed error).

    ``last_cut``: this is the last call of a response that stopped on its length limit, so an
    arguments string that is not complete JSON was cut off, not merely damaged.
    """
    if not isinstance(raw, str):
        return raw, None  # an object (some servers decode it for us), or None / a wrong type for validation
    body = clean_text(raw)  # a server's JSON may carry what text never does: lone surrogates
    if body is not raw:
        repairs.append(Repair(kind="lone_surrogate", detail="arguments: lone surrogates replaced by U+FFFD"))
    body = body.strip()
    if not body:
        return (None, _truncated()) if last_cut else ({}, None)
    try:
        value = json.loads(body)
    except RecursionError:
        return None, _error("malformed", "Tool call arguments are nested too deeply.")
    except ValueError:  # JSONDecodeError, or an integer past the int-string limit
        brace = body.find("{")
        unclosed = brace == -1 or match_close(body, brace, '"') is None
        if unclosed and (last_cut or brace != -1):
            return None, _truncated()  # the string stops inside the object: never guess the rest
        value = load_json(body, repairs)
        if not isinstance(value, dict):
            return None, _not_an_object()
    if isinstance(value, str) and value.lstrip().startswith("{"):  # a JSON string holding the object
        value = load_json(value, repairs)
        if not isinstance(value, dict):
            return None, _not_an_object()
        repairs.append(Repair(kind="double_encoded", detail="arguments JSON-encoded twice"))
    return value, None


def _not_an_object() -> CallError:
    return _error("malformed", f"Tool call arguments are not a JSON object. Use {SHAPE}.")


def parse_tool_calls(tool_calls: Any, content: Any, toolset: Toolset, finish_reason: str | None = None,
                     max_chars: int | None = MAX_REPLY_CHARS) -> ParseResult:
    """Validate ``[{"id", "type", "function": {"name", "arguments": "<json string>"}}]`` calls.

    ``finish_reason == "length"`` marks the response as cut by the token limit: its last call is
    accepted only when its arguments are complete JSON, and a response with no call is
    ``truncated`` rather than ``no_call``. Total, like ``Dialect.parse``: any value gives a
    result, and calls whose text (content, names, ids, argument strings) is over ``max_chars``
    characters in all are one ``truncated`` error without being read.
    """
    size = _text_size(tool_calls, content)
    if max_chars is not None and size > max_chars:
        return over_cap(size, max_chars)
    return guarded(lambda: _read_tool_calls(tool_calls, content, toolset, finish_reason))


def _text_size(tool_calls: Any, content: Any) -> int:
    """Characters of text in a message's content and calls (what the size cap counts)."""
    size = len(content) if isinstance(content, str) else 0
    if isinstance(content, list):
        size += sum(len(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    calls = [tool_calls] if isinstance(tool_calls, dict) else tool_calls if isinstance(tool_calls, list) else []
    for tc in calls:
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function")
        texts = [tc.get("id")] + ([fn.get("name"), fn.get("arguments")] if isinstance(fn, dict) else [])
        size += sum(len(t) for t in texts if isinstance(t, str))
    return size


def _read_tool_calls(tool_calls: Any, content: Any, toolset: Toolset, finish_reason: str | None) -> ParseResult:
    result = ParseResult(text=_content_text(content).strip())
    cut = finish_reason == "length"
    if isinstance(tool_calls, dict):
        tool_calls = [tool_calls]
    if not isinstance(tool_calls, list) or not tool_calls:
        if tool_calls not in (None, []):
            result.errors.append(_error("malformed", f"tool_calls must be a list. Use {SHAPE}."))
        elif cut:
            result.errors.append(_truncated("The response was cut off (finish_reason=length) before a "
                                            "tool call was complete."))
        else:
            result.errors.append(_error("no_call", "No tool call found. Call one of the tools."))
        return result
    for k, tc in enumerate(tool_calls):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict):
            result.errors.append(_error("malformed", f"Each tool call needs a function object. Use {SHAPE}."))
            continue
        _read_call(tc, fn, cut and k == len(tool_calls) - 1, toolset, result)
    return result


def _read_call(tc: dict, fn: dict, last_cut: bool, toolset: Toolset, result: ParseResult) -> None:
    """Validate one ``tool_calls`` entry; append the call (with its id and repairs) or its error."""
    name = fn.get("name")
    repairs: list[Repair] = []
    args, error = _arguments(fn.get("arguments"), last_cut, repairs)
    if error is None:
        call, error, arg_repairs = validate_call(name, args, toolset)
        if error is None:
            call_id = tc.get("id")
            result.calls.append(call.model_copy(update={"id": clean_text(call_id)})
                                if isinstance(call_id, str) else call)
            result.repairs.extend(repairs + arg_repairs)
            return
    if error.tool is None and isinstance(name, str) and name:
        error = error.model_copy(update={"tool": clean_text(name[:200])})
    result.errors.append(error)


def _unwrap(obj: Any) -> tuple[dict | None, str | None]:
    """(assistant message, finish_reason) from a response, a choice, a message, one call or a
    ``tool_calls`` list; (None, None) for anything else."""
    finish = None
    if isinstance(obj, dict) and isinstance(obj.get("choices"), list):
        choices = obj["choices"]
        obj = choices[0] if choices else None
    if isinstance(obj, dict) and isinstance(obj.get("message"), dict):
        finish = obj.get("finish_reason")
        obj = obj["message"]
    if isinstance(obj, list):
        return {"tool_calls": obj}, None
    if not isinstance(obj, dict):
        return None, None
    if "function" in obj and not obj.keys() & _MESSAGE_KEYS:
        return {"tool_calls": [obj]}, None
    if not obj.keys() & _MESSAGE_KEYS:
        return None, None
    if not obj.get("tool_calls") and isinstance(obj.get("function_call"), dict):  # the legacy field
        obj = {**obj, "tool_calls": [{"function": obj["function_call"]}]}
    return obj, finish if isinstance(finish, str) else None


def _open_brackets(text: str, start: int) -> tuple[list[int], bool]:
    """Positions of the JSON brackets still open at the end of ``text``, and whether it ends inside
    a string. One step per bracket or string (``string_end``), not a Python step per character."""
    stack: list[int] = []
    pos = start
    while (m := _BRACKET_OR_QUOTE.search(text, pos)) is not None:
        token, pos = m.group(), m.end()
        if token == '"':
            end = string_end(text, pos, '"')
            if end is None:
                return stack, True
            pos = end
        elif token in "{[":
            stack.append(m.start())
        elif stack:
            stack.pop()
    return stack, False


class OpenAIDialect(Dialect):
    name = "openai"
    tool_role = "tool"

    # -- rendering: the request's messages and tools ---------------------------------------------

    def system_prompt(self, toolset: Toolset, instructions: str = "") -> str:
        """Only the instructions: the tools go in the request's ``tools`` list (``tools()``)."""
        return instructions.strip()

    def tools(self, toolset: Toolset) -> list[dict[str, Any]]:
        """The request's ``tools`` field."""
        return toolset.openai()

    def render_message(self, content: str, calls: list[ToolCall], ids: list[str | None] | None = None) -> dict:
        """One assistant message; a call's id is its own, else ``ids[k]``, else left out."""
        message: dict[str, Any] = {"role": "assistant", "content": content.strip() or None}
        if calls:
            message["tool_calls"] = []
            for k, c in enumerate(calls):
                entry: dict[str, Any] = {}
                call_id = c.id or (ids[k] if ids else None)
                if call_id:
                    entry["id"] = call_id
                entry["type"] = "function"
                entry["function"] = {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}
                message["tool_calls"].append(entry)
        return message

    def render_assistant(self, content: str, calls: list[ToolCall]) -> str:
        return json.dumps(self.render_message(content, calls), ensure_ascii=False)

    def render_tool_results(self, results: list[Message]) -> str:
        return json.dumps([{"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
                           for m in results], ensure_ascii=False)

    def to_chat(self, messages: list[Message], toolset: Toolset, tokenizer: Any = None) -> list[dict[str, Any]]:
        """OpenAI chat messages: assistant turns with ``tool_calls`` (ids ``call_<i>_<k>`` made up
        where the harness had none), one ``tool`` message per result with the id it answers.
        Feedback on a call that was never made (a parse error) has no id to answer and goes back
        as a user message. With ``tokenizer`` (the server's, when known), control tokens in the
        text and the argument values are escaped, as ``Dialect.to_chat`` does."""
        guard = self.guard(tokenizer)
        out: list[dict[str, Any]] = []
        for i, m in enumerate(messages):
            content = guard.content(m.content) if guard else m.content
            if m.role == "assistant":
                ids = [f"call_{i}_{k}" for k in range(len(m.tool_calls))]
                calls = m.tool_calls if guard is None else [
                    c.model_copy(update={"arguments": guard.content.value(c.arguments)}) for c in m.tool_calls]
                out.append(self.render_message(content, calls, ids) if calls
                           else {"role": "assistant", "content": content})
            elif m.role == "tool":
                call_id = m.tool_call_id or _answered_id(messages, i)
                if call_id is None:
                    out.append({"role": "user", "content": content})
                else:
                    out.append({"role": "tool", "content": content, "tool_call_id": call_id})
            else:
                out.append({"role": m.role, "content": content})
        return out

    def chat_text(self, tokenizer, messages: list[Message], toolset: Toolset, render_mode: str = "dialect") -> str:
        raise ValueError("the openai dialect is structured messages for an OpenAI-compatible server; a local "
                         "tokenizer needs a text dialect (Dialect.for_model(model, chat_template) picks one)")

    # -- parsing --------------------------------------------------------------------------------

    def parse_message(self, message: dict, toolset: Toolset, finish_reason: str | None = None) -> ParseResult:
        """Parse one assistant message as an API returns it."""
        if not isinstance(message, dict):
            return ParseResult(errors=[_error("malformed", f"Not an OpenAI chat message. Use {SHAPE}.")])
        return parse_tool_calls(message.get("tool_calls"), message.get("content"), toolset, finish_reason,
                                self.max_chars)

    def parse_response(self, obj: Any, toolset: Toolset) -> ParseResult:
        """Parse a decoded response, choice, message, call or ``tool_calls`` list."""
        message, finish = _unwrap(obj)
        if message is None:
            return ParseResult(errors=[_error("malformed", f"Not an OpenAI chat message. Use {SHAPE}.")])
        return self.parse_message(message, toolset, finish)

    def _parse(self, text: str, toolset: Toolset) -> ParseResult:
        """Parse the JSON text of a response, choice, message or ``tool_calls`` list. Text that is
        not JSON at all is plain assistant content (``no_call``)."""
        body = text.strip()
        if not body.startswith(("{", "[")):
            return ParseResult(text=body, errors=[_error("no_call", "No tool call found. Call one of the tools.")])
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):  # damaged or cut off; or too deep, or an int past the limit
            pass
        else:
            return self.parse_response(decoded, toolset)
        repairs: list[Repair] = []
        span = read_json_at(body, 0, repairs)
        if span.truncated:
            return self._parse_cut(body, toolset)
        if span.value is None:
            return ParseResult(errors=[_error("malformed", f"The response is not readable JSON. Use {SHAPE}.")])
        if body[span.end:].strip():
            repairs.append(Repair(kind="extra_data", detail=body[span.end:span.end + 80]))
        return _with_repairs(self.parse_response(span.value, toolset), repairs)

    def _parse_cut(self, body: str, toolset: Toolset) -> ParseResult:
        """A response whose JSON stops before its end: the calls written out before the cut are
        read, the one the cut falls in is ``truncated``, nothing is completed by guessing."""
        stack, in_str = _open_brackets(body, 0)
        # Where each '"tool_calls": [' list opens, found in one pass (searching back from every
        # open bracket made a text of many brackets quadratic).
        keys = {m.end() - 1: m for m in _TOOL_CALLS_KEY.finditer(body)}
        for depth, pos in enumerate(stack):
            key = keys.get(pos)
            if key is None:
                continue
            calls, cut_inside = self._calls_before_cut(body, pos)
            # The content (written before the calls) from the text before the key alone: repairing
            # the whole response would also re-read every call, which is the slow part.
            message, _ = _unwrap(repair_json(body[:key.start()].rstrip().rstrip(",")))
            result = parse_tool_calls(calls, message.get("content") if message else None, toolset)
            if not calls:
                result.errors.clear()
            if cut_inside or depth < len(stack) - 1 or in_str or not calls:
                result.errors.append(_truncated())
                return result
            return _with_repairs(result, [_UNCLOSED])
        envelope = repair_json(body)
        message, _ = _unwrap(envelope)
        # The cut is outside any tool_calls list: before it began, or after it closed.
        result = self.parse_response(envelope, toolset) if message else ParseResult(text="")
        if result.calls:
            return _with_repairs(result, [_UNCLOSED])
        return ParseResult(text=result.text, errors=[_truncated(
            "The response was cut off before a tool call was complete.")])

    @staticmethod
    def _calls_before_cut(body: str, open_at: int) -> tuple[list, bool]:
        """The complete elements of the ``tool_calls`` list opening at ``open_at``; True when the
        text ends inside an element."""
        calls: list = []
        i = open_at + 1
        while True:
            while i < len(body) and body[i] in " \t\r\n,":
                i += 1
            if i >= len(body):
                return calls, False
            repairs: list[Repair] = []
            span = read_json_at(body, i, repairs) if body[i] in "{[" else None
            if span is None or span.truncated:
                return calls, True
            calls.append(span.value)
            i = span.end




def _with_repairs(result: ParseResult, repairs: list[Repair]) -> ParseResult:
    """Envelope repairs belong to every call read through the envelope; none when none was."""
    if repairs and result.calls:
        result.repairs[:0] = repairs
    return result


def _answered_id(messages: list[Message], i: int) -> str | None:
    """Id of the call a tool message answers (the k-th tool message after an assistant turn
    answers its k-th call); None when there is no such call."""
    k, j = 0, i - 1
    while j >= 0 and messages[j].role == "tool":
        k, j = k + 1, j - 1
    calls = messages[j].tool_calls if j >= 0 else []
    if k >= len(calls):
        return None
    return calls[k].id or f"call_{j}_{k}"


class _CallParts:
    """One streamed call's text, kept as the fragments that arrived: appending to a string on every
    delta copies it each time, which is quadratic in the number of deltas."""

    __slots__ = ("id", "name", "arguments")

    def __init__(self) -> None:
        self.id: list[str] | None = None
        self.name: list[str] = []
        self.arguments: list[str] = []

    def entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "function",
                                 "function": {"name": "".join(self.name), "arguments": "".join(self.arguments)}}
        if self.id is not None:
            entry["id"] = "".join(self.id)
        return entry


class DeltaAccumulator:
    """Assembles a streamed chat completion into the message a non-streamed call would return.

    Feed it each ``chat.completion.chunk`` (or just its ``choices[0].delta``). Content pieces are
    concatenated; a ``tool_calls`` delta is merged into the call with the same ``index`` — its
    ``id``, ``function.name`` and ``function.arguments`` strings appended, as OpenAI's own client
    accumulates them — so any split of the arguments into fragments gives the same calls.

    Total and linear, like the parsers: ``feed`` never raises (a chunk that is not a delta is
    counted, and ``finish`` reports it as a ``malformed`` error), fragments are joined once, and a
    stream whose text passes ``max_chars`` stops being kept and finishes as ``truncated``.
    """

    def __init__(self, max_chars: int | None = MAX_REPLY_CHARS) -> None:
        self.max_chars = max_chars
        """Most characters of content and call text kept; None keeps any length."""
        self._content: list[str] = []
        self._calls: dict[int, _CallParts] = {}
        self._size = 0
        self._unreadable = 0
        self.finish_reason: str | None = None
        """The stream's ``finish_reason`` once a chunk carried one (``length``: cut by the limit)."""

    def _keep(self, parts: list[str], piece: Any) -> None:
        if isinstance(piece, str):
            self._size += len(piece)
            if self.max_chars is None or self._size <= self.max_chars:
                parts.append(piece)

    def feed(self, chunk: Any) -> None:
        delta = self._delta(chunk)
        if delta is None:
            return
        self._keep(self._content, delta.get("content"))
        parts = delta.get("tool_calls")
        if parts is None:
            return
        if not isinstance(parts, list):
            self._unreadable += 1
            return
        for k, part in enumerate(parts):
            index = part.get("index", k) if isinstance(part, dict) else None
            fn = (part.get("function") or {}) if isinstance(part, dict) else None
            if type(index) is not int or not isinstance(fn, dict):
                self._unreadable += 1
                continue
            slot = self._calls.get(index)
            if slot is None:
                slot = self._calls[index] = _CallParts()
            if isinstance(part.get("id"), str):
                if slot.id is None:
                    slot.id = []
                self._keep(slot.id, part["id"])
            self._keep(slot.name, fn.get("name"))
            self._keep(slot.arguments, fn.get("arguments"))

    def _delta(self, chunk: Any) -> dict | None:
        """The delta of one chunk (the chunk itself when it is a bare delta); None for a usage-only
        chunk and for anything unreadable (counted)."""
        if not isinstance(chunk, dict):
            self._unreadable += 1
            return None
        choices = chunk.get("choices")
        if choices is None:
            return chunk
        if not isinstance(choices, list):
            self._unreadable += 1
            return None
        if not choices:  # a usage-only chunk
            return None
        choice = choices[0]
        if not isinstance(choice, dict):
            self._unreadable += 1
            return None
        if isinstance(choice.get("finish_reason"), str):
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            self._unreadable += 1
            return None
        return delta

    @property
    def message(self) -> dict[str, Any]:
        """The assembled assistant message so far."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content) or None}
        if self._calls:
            message["tool_calls"] = [self._calls[i].entry() for i in sorted(self._calls)]
        return message

    def finish(self, toolset: Toolset) -> ParseResult:
        """Parse the assembled message, exactly as ``OpenAIDialect.parse_message`` would."""
        if self.max_chars is not None and self._size > self.max_chars:
            return over_cap(self._size, self.max_chars)
        message = self.message
        result = parse_tool_calls(message.get("tool_calls"), message["content"], toolset, self.finish_reason,
                                  self.max_chars)
        if self._unreadable:
            result.errors.append(_error("malformed", (
                f"{self._unreadable} stream chunk(s) or call fragment(s) were not chat.completion.chunk "
                "deltas and were skipped.")))
        return few_errors(result)
