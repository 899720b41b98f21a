"""What a parse admits and spends: the reply size cap, the json-repair budget, and text and values
that stay valid UTF-8 JSON.

A collection stores every episode as JSON lines, so whatever a parse returns — the text, the call
names, ids and arguments, the error messages — must survive ``json.dumps(..., ensure_ascii=False)
.encode("utf-8")`` and pydantic's ``model_dump_json``. Model text can break that in a few ways, all
handled here, in one place:

- lone surrogates: a ``\\ud83d`` escape decodes to a code point UTF-8 cannot hold (and invalid bytes
  decoded with ``surrogateescape`` leave the same); text is repaired to U+FFFD, argument strings
  too (recorded as a ``lone_surrogate`` repair);
- numbers JSON cannot hold: ``NaN``, ``Infinity``, ``1e999`` (which Python reads as inf) and
  integers past the int-string limit are typed errors, never stored;
- nesting deeper than ``MAX_DEPTH``: no tool takes such arguments, and a value nested near the
  interpreter's recursion limit makes ``json.dumps`` (or ``repr``) raise later, far from here;
- values that are not JSON at all (bytes, complex numbers, tuple keys a Python literal can hold).
"""

from __future__ import annotations

import sys
import threading
from typing import Any, NamedTuple

MAX_REPLY_CHARS = 256 * 1024
"""Longest reply a dialect parses, in characters (``Dialect(max_chars=...)`` changes it). At ~4
characters a token that is 64K tokens in one turn: no tool call is that long, and a reply that is
(a runaway generation, or a model probing the parser) is a ``truncated`` error without being read."""

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in call arguments."""

MAX_ERRORS = 32
"""Most errors one parse lists; the rest are counted in the last one. Each error goes back to the
model as a message, so a reply of 20,000 broken tags must not become 20,000 messages (nor a
megabyte-sized step in the store)."""

REPAIR_LIMIT = 2_000
"""Largest damaged JSON handed to json-repair, in characters. json-repair is pure Python and, on
the wrong input, worse than quadratic: 500 characters of ``{"{"{"`` take ~20 ms, 2,000 take
~0.3 s, 8,000 take 5 s (measured on the 2-core machine). So damaged JSON is first read by two
linear readers — ``json.loads(strict=False)`` (raw newlines and tabs inside strings, the common
damage in code arguments) and ``ast.literal_eval`` (single quotes, True/None, trailing commas) —
and only what neither reads goes to json-repair, up to this size; a larger call that broken is
reported malformed instead (the model can resend it), and strict JSON of any size still parses."""

REPAIR_BUDGET = REPAIR_LIMIT * REPAIR_LIMIT
"""What one parse may spend in json-repair, in units of (characters)² — its worst-case cost grows
about with the square of the input — counting small inputs as ``_REPAIR_FLOOR`` characters: one
call of ``REPAIR_LIMIT`` characters, or a hundred of 200. Past it, damaged calls are malformed, so
a reply of a thousand small broken calls costs well under a second, not minutes."""

_REPAIR_FLOOR = 200
# Per thread, not a ContextVar: a parse never awaits, so no two parses interleave on one thread, and
# one attribute store per parse is cheaper than a ContextVar set and reset on every turn's hot path.
_budget = threading.local()


def start_repair_budget() -> None:
    """Give the parse now starting its json-repair budget (``REPAIR_BUDGET``)."""
    _budget.left = REPAIR_BUDGET


def spend_repair(chars: int) -> bool:
    """Take one json-repair run of ``chars`` characters out of the budget; False when it does not fit.
    Outside any parse (a helper called directly) the budget is whatever the thread's last parse left."""
    if chars > REPAIR_LIMIT:
        return False
    cost = max(chars, _REPAIR_FLOOR) ** 2
    left = getattr(_budget, "left", REPAIR_BUDGET)
    if cost > left:
        return False
    _budget.left = left - cost
    return True


INT_BITS = int((sys.get_int_max_str_digits() or 10**9) * 3.32)
"""Integers longer than this many bits may have more decimal digits than the interpreter converts
to text (``json.dumps`` would raise); 3.32 bits a digit, rounded down to stay inside the limit."""


def clean_text(text: str) -> str:
    """``text`` as valid Unicode: surrogate pairs joined, lone surrogates replaced by U+FFFD.

    ASCII text (the common case) is returned as is after an O(1) check; other text is encoded once.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        # UTF-16 with surrogatepass joins a high+low pair written as two code points into the one
        # character it stands for; what is left unpaired decodes as U+FFFD.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def as_text(value: Any) -> str:
    """Whatever a model or server handed over, as clean text: ``bytes`` decoded as UTF-8 (invalid
    sequences become U+FFFD), ``None`` as empty, anything else through ``str``."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if value is None:
        return ""
    try:
        return clean_text(str(value))
    except Exception:  # noqa: BLE001 - an object whose __str__ fails is still an answer: no text
        return ""


def clip(text: str, limit: int = 80) -> str:
    """A model-written name or key cut to about ``limit`` characters, for a message or a detail."""
    return text if len(text) <= limit else text[:limit] + "…"


def short(value: Any, limit: int = 60) -> str:
    """``repr`` of a model-written name or value for a message, cut to about ``limit`` characters:
    an error message goes back into the model's context, so it must not carry a megabyte."""
    if isinstance(value, str) and len(value) > limit:
        return repr(clean_text(value[:limit])) + "…"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int past the digit limit, a structure nested too deep
        return f"<{type(value).__name__}>"
    return clean_text(text[:limit] + "…" if len(text) > limit else text)


class Settled(NamedTuple):
    """A decoded value made storable, or the reason it cannot be."""

    value: Any
    """The value, with lone surrogates in its strings replaced (None when ``problem``)."""
    problem: str | None = None
    """Why the value cannot be stored as JSON (a model-facing phrase), or None."""
    repaired: bool = False
    """True when a string had to be repaired (lone surrogates)."""


class _Unstorable(Exception):
    pass


def _fix_str(s: str, fixed: list[bool]) -> str:
    clean = clean_text(s)
    if clean is not s:
        fixed[0] = True
    return clean


def _settle(value: Any, depth: int, fixed: list[bool]) -> Any:
    t = type(value)
    if t is str:
        return _fix_str(value, fixed)
    if t is bool or value is None:
        return value
    if t is int:
        if value.bit_length() > INT_BITS:
            raise _Unstorable("a number has more digits than JSON text can carry here")
        return value
    if t is float:
        if value - value != 0.0:  # inf - inf and nan - nan are nan
            raise _Unstorable("a number is not finite (NaN, Infinity or too large for a float)")
        return value
    if depth >= MAX_DEPTH:
        raise _Unstorable(f"arguments are nested deeper than {MAX_DEPTH} levels")
    if t is list or t is tuple:
        return [_settle(v, depth + 1, fixed) for v in value]
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _Unstorable(f"an object key is a {type(k).__name__}, not a string")
            out[_fix_str(k, fixed)] = _settle(v, depth + 1, fixed)
        return out
    raise _Unstorable(f"a value is a {t.__name__}, which JSON cannot hold")


def settle(value: Any) -> Settled:
    """``value`` (decoded JSON or a Python literal) as storable JSON data, or why it is not.

    Tuples become lists; strings keep their text with lone surrogates replaced. Linear in the size
    of the value and never deeper than ``MAX_DEPTH`` frames.
    """
    fixed = [False]
    try:
        return Settled(_settle(value, 0, fixed), None, fixed[0])
    except _Unstorable as e:
        return Settled(None, str(e), False)


def storable(value: Any) -> bool:
    """True when ``value`` is certainly storable as it is (the check ``settle`` would pass without
    a change); the fast test the argument checker runs on every value it does not inline."""
    t = type(value)
    if t is str:
        return value.isascii() or clean_text(value) is value
    if t is bool or value is None:
        return True
    if t is int:
        return value.bit_length() <= INT_BITS
    if t is float:
        return value - value == 0.0
    if t is list or t is dict:
        settled = settle(value)
        return settled.problem is None and not settled.repaired
    return False
