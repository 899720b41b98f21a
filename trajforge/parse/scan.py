"""Small text-scanning helpers shared by the dialects: bracket matching, tolerant JSON, call intake.

Every dialect finds the *extent* of a call first (a matching bracket, a closing tag) and only then
decodes it. Finding the extent with a string-aware scanner rather than a regex is what lets a value
contain ``}``, ``]`` or a closing fence, and what tells a call cut off at the end of the text
(``truncated``: never guessed) from one that is merely damaged (``json_repair``: recorded).

Everything here is linear in the text it reads, whatever the text: the bracket scan steps per
bracket run or string, a string's end is found with ``str.find``, a failed decode costs what it
read (``decode_at``), repeated tag searches are remembered (``Finder``), and json-repair — the one
superlinear reader — gets small inputs within a per-parse budget (``limits.REPAIR_BUDGET``).
"""

from __future__ import annotations

import ast
import functools
import json
import re
from typing import Any, NamedTuple

import json_repair

from trajforge.parse.base import ParseResult
from trajforge.parse.limits import REPAIR_LIMIT, spend_repair  # REPAIR_LIMIT: 0.1 imported it from here
from trajforge.parse.validate import validate_call
from trajforge.schema import CallError, Repair, Toolset

_OPEN, _CLOSE = "{[(", "}])"
DECODER = json.JSONDecoder()
_LENIENT = json.JSONDecoder(strict=False)  # raw control characters allowed inside strings


# Outside strings only brackets and quotes matter: the text between two closers or quotes is one
# match whose openers are counted in C, so a megabyte of "[[[[" (or of prose) is a few steps rather
# than a million. A string without a backslash is one match too (most are); one with escapes is
# read by ``string_end`` from its opening quote.
_TOKENS = {
    "\"'": re.compile(r"""[^\]})"']+|[\]})]+|"[^"\\]*"|'[^'\\]*'|["']"""),
    '"': re.compile(r"""[^\]})"]+|[\]})]+|"[^"\\]*"|["]"""),
}


def string_end(text: str, pos: int, quote: str) -> int | None:
    """Index just past the ``quote`` that closes a string whose body starts at ``pos``; None when
    the text ends first. A quote closes when an even run of backslashes (none, or escaped ones)
    stands before it.

    Found with ``str.find`` from quote to quote, counting only the backslashes right before each:
    linear in the string whatever it holds. (A regex such as ``"[^"\\]*(?:\\.[^"\\]*)*"`` is
    not: the engine's per-repetition bookkeeping made a megabyte of escapes take ~7x per KB what
    64 KB did.)
    """
    lo = pos
    while (at := text.find(quote, pos)) != -1:
        before = text[lo:at]  # no backslash run crosses lo: a quote (or the opening one) is before it
        if (len(before) - len(before.rstrip("\\"))) % 2 == 0:
            return at + 1
        lo = pos = at + 1
    return None


def match_close(text: str, start: int, quotes: str = "\"'") -> int | None:
    """Index just past the bracket closing ``text[start]`` (one of ``{[(``), or None when the text
    ends first. Brackets inside quoted strings (``quotes``: both kinds, or ``'"'`` only; backslash
    escapes) are skipped."""
    tokens = _TOKENS[quotes]
    depth, pos = 0, start
    while (m := tokens.search(text, pos)) is not None:
        token, pos = m.group(), m.end()
        first = token[0]
        if first in _CLOSE:
            if 0 < depth <= len(token):
                return m.start() + depth
            depth -= len(token)
        elif first in quotes:
            if len(token) == 1:  # a string with escapes (or none closing it)
                end = string_end(text, pos, first)
                if end is None:
                    return None
                pos = end
        else:
            depth += token.count("{") + token.count("[") + token.count("(")
    return None


NEAR = 4096
"""Below this position a failed decode costs little wherever it happens (see ``decode_at``): a
caller on a hot path may call ``DECODER.raw_decode`` itself there."""


def decode_at(text: str, start: int) -> tuple[Any, int]:
    """``json.JSONDecoder().raw_decode(text, start)``, with what a failure costs bounded by what was
    read rather than by ``start``.

    json's error carries the line and column of the failure, counted from the start of the whole
    text: a decode that fails late in a long text costs O(position), so a reply of many broken calls
    decoded where each stands was quadratic. Past ``NEAR`` the decoder reads a slice instead, which
    doubles while the value runs past its end (a failure at the cut, an unterminated string, a value
    ending exactly at the cut) — at most twice the reading the value itself needs. Raises what
    ``raw_decode`` raises (``ValueError``, ``RecursionError``).
    """
    if start < NEAR:
        return DECODER.raw_decode(text, start)
    size, n = NEAR, len(text)
    while True:
        whole = start + size >= n
        piece = text[start:] if whole else text[start:start + size]
        try:
            value, end = DECODER.raw_decode(piece)
        except json.JSONDecodeError as e:
            if whole or (e.pos < len(piece) - 16 and not e.msg.startswith("Unterminated string")):
                raise
        else:
            if whole or end < len(piece):  # ended inside the slice: a number there cannot go on
                return value, start + end
        size *= 2


_UNREAD = object()
_PYTHONISH = re.compile(r"'|\b(?:True|False|None)\b|,\s*[}\]]")


def _python_literal(body: str) -> Any:
    """``ast.literal_eval`` of ``body`` (a literal only: nothing is evaluated), or ``_UNREAD``.

    Tuples and other Python-only values are left for ``limits.settle``, which validation runs:
    tuples become lists, bytes or complex numbers are typed errors.
    """
    try:
        return ast.literal_eval(body.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNREAD


def repair_json(body: str) -> Any:
    """A lenient reading of damaged JSON; None when nothing usable comes out of it.

    Linear readers first (JSON with raw control characters in strings, then a Python literal),
    then json-repair within the size limit and the parse's budget.
    """
    try:
        return _LENIENT.decode(body)
    except RecursionError:
        return None
    except ValueError:  # JSONDecodeError, or an integer past the int-string limit
        pass
    if not body.strip():
        return None
    # Only a dict or a list that shows some Python (a quote, a constant, a trailing comma) is worth
    # the compiler's time: a failed literal_eval costs ~30 us, and a reply can hold thousands.
    if body.lstrip()[:1] in ("{", "[") and _PYTHONISH.search(body):
        value = _python_literal(body)
        if value is not _UNREAD:
            return value
    if not spend_repair(len(body)):
        return None
    try:
        return json_repair.loads(body)
    except Exception:  # noqa: BLE001 - json-repair's own failure on hostile input means "unreadable"
        return None


def load_json(body: str, repairs: list[Repair]) -> Any:
    """Strict JSON, else a lenient reading (recorded as ``json_repair``); None when nothing usable
    comes out."""
    if not body or body.isspace():
        return None
    try:
        return json.loads(body)
    except RecursionError:  # nested deeper than the interpreter allows: no call looks like that
        return None
    except ValueError:  # JSONDecodeError, or an integer past the int-string limit
        pass
    fixed = repair_json(body)
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
        repairs.append(shared_repair("string_arguments", detail))
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

    ``raw_decode`` first (``decode_at``: exact, and stops where the value stops, so trailing text
    is left alone); then the string-aware bracket scan decides between truncated (text ended inside
    the value) and damaged (repaired, value None when beyond repair).
    """
    try:
        value, end = decode_at(text, start)
        return Span(value, end)
    except (ValueError, RecursionError):  # damaged, nested too deep, or an integer past the limit
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


class Finder:
    """``str.find`` for a text that is searched left to right again and again for the same markers.

    Each needle's last answer is kept: a search from a position between where the last one started
    and what it found has the same answer, so looking for a closing tag that never comes costs one
    scan of the text in all, not one per opening tag (which made a few hundred KB of unclosed
    ``<tool_call>`` tags take seconds).
    """

    __slots__ = ("text", "_last")

    def __init__(self, text: str):
        self.text = text
        self._last: dict[str, tuple[int, int]] = {}

    def find(self, needle: str, start: int) -> int:
        """Index of the first ``needle`` at or after ``start``; ``len(text)`` when there is none."""
        last = self._last.get(needle)
        if last is not None and last[0] <= start <= last[1]:
            return last[1]
        at = self.text.find(needle, start)
        found = len(self.text) if at == -1 else at
        self._last[needle] = (start, found)
        return found

    def first(self, needles: tuple[str, ...], start: int) -> int:
        """Index of the first of ``needles`` at or after ``start``; ``len(text)`` when none occurs."""
        at = len(self.text)
        for needle in needles:
            found = self.find(needle, start)
            if found < at:
                at = found
        return at


def read_block(found: Finder, body_start: int, close: str, stops: tuple[str, ...], json_first: bool = True) -> Block:
    """The body of a tagged call starting at ``body_start``: up to ``close``, else up to the first
    of ``stops`` (not consumed), else to the end of the text.

    When the body holds a JSON object, the search for the closing tag starts after that object, so
    a string value that contains the closing tag (or a stop) does not end the call early.
    ``json_first=False``: the caller already knows the body's first object does not decode.
    """
    text = found.text
    search_from = body_start
    brace = found.find("{", body_start) if json_first else len(text)
    if brace < found.first((close, *stops), body_start):
        try:
            search_from = decode_at(text, brace)[1]
        except (ValueError, RecursionError):
            search_from = body_start  # damaged JSON: the tags decide, as they must
    c, s = found.find(close, search_from), found.first(stops, search_from)
    if c < len(text) and c <= s:
        return Block(text[body_start:c], c + len(close), True)
    return Block(text[body_start:s], s, False)


def join_text(pieces: list[str]) -> str:
    """Text outside the calls: each piece stripped, empty ones dropped, joined by newlines."""
    return "\n".join(p.strip() for p in pieces if p.strip())


# The same error is one object: a hostile reply can hold a hundred thousand broken calls, and
# building as many identical pydantic objects (only MAX_ERRORS of which are kept) made parse time
# per KB grow with the size of the reply. Nothing mutates an error; a changed one is a model_copy.
@functools.lru_cache(maxsize=512)
def call_error(kind: str, message: str) -> CallError:
    """The (shared) error of this kind and message."""
    return CallError(kind=kind, message=message)


@functools.lru_cache(maxsize=512)
def shared_repair(kind: str, detail: str) -> Repair:
    """The (shared) repair of this kind and detail: as with errors, one object for the thousands
    of identical repairs (an unclosed tag per call) a long reply of calls can carry."""
    return Repair(kind=kind, detail=detail)


def no_call(hint: str) -> CallError:
    return call_error("no_call", f"No tool call found. Call a tool with {hint}.")


def malformed(hint: str, why: str = "Tool call could not be read") -> CallError:
    return call_error("malformed", f"{why}. Use {hint}.")


def truncated() -> CallError:
    return call_error("truncated", "The tool call was cut off before it was complete.")


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
