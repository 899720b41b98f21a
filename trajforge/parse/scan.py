"""Small text-scanning helpers shared by the dialects: bracket matching, tolerant JSON, call intake.

Every dialect finds the *extent* of a call first (a matching bracket, a closing tag) and only then
decodes it. Finding the extent with a string-aware scanner rather than a regex is what lets a value
contain ``}``, ``]`` or a closing fence, and what tells a call cut off at the end of the text
(``truncated``: never guessed) from one that is merely damaged (``json_repair``: recorded).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import json_repair

from trajforge.parse.base import ParseResult
from trajforge.parse.validate import validate_call
from trajforge.schema import CallError, Repair, Toolset

_OPEN, _CLOSE = "{[(", "}])"
_DECODER = json.JSONDecoder()


def match_close(text: str, start: int, quotes: str = "\"'") -> int | None:
    """Index just past the bracket closing ``text[start]`` (one of ``{[(``), or None when the text
    ends first. Brackets inside quoted strings (either quote kind, backslash escapes) are skipped."""
    depth, quote, esc = 0, "", False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                quote = ""
            continue
        if ch in quotes:
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def load_json(body: str, repairs: list[Repair]) -> Any:
    """Strict JSON, else json-repair (recorded); None when nothing usable comes out."""
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        pass
    except RecursionError:  # nested deeper than the interpreter allows: no call looks like that
        return None
    try:
        fixed = json_repair.loads(body)
    except RecursionError:
        return None
    if fixed in ("", None, [], {}) and body.strip() not in ("{}", "[]"):
        return None
    repairs.append(Repair(kind="json_repair", detail=body[:80]))
    return fixed


def load_string_arguments(raw: str, repairs: list[Repair], detail: str = "arguments given as a JSON string") -> Any:
    """Arguments written as a JSON *string* (an OpenAI habit), decoded with the repair recorded.

    None when the string holds nothing readable: the caller reports that as ``malformed``, never
    as "no arguments", so a tool without required parameters is not called with defaulted ones.
    """
    value = load_json(raw, repairs)
    if value is not None:
        repairs.append(Repair(kind="string_arguments", detail=detail))
    return value


class Span(NamedTuple):
    """One JSON value read at a position."""

    value: Any
    """The decoded value (None when beyond repair or truncated)."""
    end: int
    """Index just past the value (the end of the text when truncated)."""
    truncated: bool = False
    """True when the text ended inside the value."""


def read_json_at(text: str, start: int, repairs: list[Repair]) -> Span:
    """Decode the JSON value starting at ``text[start]`` (``{`` or ``[``).

    ``raw_decode`` first (exact, and stops where the value stops, so trailing text is left alone);
    then the string-aware bracket scan decides between truncated (text ended inside the value) and
    damaged (repaired with json-repair, value None when beyond repair).
    """
    try:
        value, end = _DECODER.raw_decode(text, start)
        return Span(value, end)
    except (json.JSONDecodeError, RecursionError):
        pass
    end = match_close(text, start)
    if end is None:
        return Span(None, len(text), truncated=True)
    return Span(load_json(text[start:end], repairs), end)


class Block(NamedTuple):
    """Extent of one tagged call: its body and where the block ends."""

    body: str
    """Text between the opening tag and the closing tag (or the cut)."""
    end: int
    """Index where the surrounding text resumes."""
    closed: bool
    """True when the closing tag was found."""


def read_block(text: str, body_start: int, close: str, stops: tuple[str, ...]) -> Block:
    """The body of a tagged call starting at ``body_start``: up to ``close``, else up to the first
    of ``stops`` (not consumed), else to the end of the text.

    When the body holds a JSON object, the search for the closing tag starts after that object, so
    a string value that contains the closing tag (or a stop) does not end the call early.
    """
    def first(markers: tuple[str, ...], start: int) -> int:
        found = [i for m in markers if (i := text.find(m, start)) != -1]
        return min(found) if found else len(text)

    search_from = body_start
    brace = text.find("{", body_start)
    if brace != -1 and brace < first((close, *stops), body_start):
        try:
            search_from = _DECODER.raw_decode(text, brace)[1]
        except (json.JSONDecodeError, RecursionError):
            search_from = body_start  # damaged JSON: the tags decide, as they must
    c, s = first((close,), search_from), first(stops, search_from)
    if c < len(text) and c <= s:
        return Block(text[body_start:c], c + len(close), True)
    return Block(text[body_start:s], s, False)


def join_text(pieces: list[str]) -> str:
    """Text outside the calls: each piece stripped, empty ones dropped, joined by newlines."""
    return "\n".join(p.strip() for p in pieces if p.strip())


def no_call(hint: str) -> CallError:
    return CallError(kind="no_call", message=f"No tool call found. Call a tool with {hint}.")


def malformed(hint: str, why: str = "Tool call could not be read") -> CallError:
    return CallError(kind="malformed", message=f"{why}. Use {hint}.")


def truncated() -> CallError:
    return CallError(kind="truncated", message="The tool call was cut off before it was complete.")


def add_call(result: ParseResult, name: Any, arguments: Any, toolset: Toolset,
             repairs: list[Repair]) -> None:
    """Validate one decoded call; append it (with its repairs) or its typed error to ``result``."""
    call, error, arg_repairs = validate_call(name, arguments, toolset)
    if error:
        result.errors.append(error)
        return
    result.calls.append(call)
    result.repairs.extend(repairs + arg_repairs)


def compact_tools(toolset: Toolset) -> str:
    """One OpenAI-style JSON tool per line, as most families show them."""
    return "\n".join(json.dumps(t.openai(), ensure_ascii=False) for t in toolset.tools)


def with_instructions(instructions: str, body: str) -> str:
    head = instructions.strip()
    return f"{head}\n\n{body}" if head else body
