"""Deterministic fuzz: 10,000 malformed model outputs spread over every dialect (issue 3).

A seeded ``random.Random`` rather than hypothesis: the same inputs on every run, no shrinking
database, fast enough for the default suite. Inputs are rendered calls (valid ones, unknown tools,
wrong argument types, missing and extra arguments) damaged in the ways models damage them: cut off,
braces dropped or added, quotes and commas broken, data after the JSON, objects run together, NUL
bytes, invalid UTF-8, another dialect's markers, plus a handful of 1 MB arguments and deep nesting.

For every input: ``parse`` raises nothing; the result has accepted calls or typed errors; every
accepted call names a known tool, validates against that tool's JSON schema, and carries only
argument keys the raw text contains — no call is ever dispatched with defaulted or invented arguments.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Literal

import jsonschema
import pytest

from trajforge.parse import DIALECTS, get_dialect
from trajforge.schema import ToolCall, ToolSpec, Toolset

SEED = 20261129
N = 10_000
BIG_EVERY = 2_000  # inputs i with i % BIG_EVERY == 1 carry a 1 MB argument (5 in all: they are slow)
DEEP_EVERY = 2_000  # i % DEEP_EVERY == 3: thousands of nested brackets
KINDS = {"no_call", "malformed", "unknown_tool", "invalid_args", "truncated"}


def search(query: str, limit: int = 10, exact: bool = False) -> str:
    """Search documents."""


def plot(values: list[float], title: str, scale: float = 1.0) -> str:
    """Plot numbers."""


def convert(amount: float, unit: Literal["celsius", "fahrenheit", "kelvin"], precise: bool) -> str:
    """Convert a temperature."""


def tag(labels: list[str], priority: int, note: str = "") -> str:
    """Tag the item."""


def get_time(timezone: str) -> str:
    """Current time."""


def ping() -> str:
    """Check the service."""


TOOLS = Toolset(tools=tuple(ToolSpec.from_function(f) for f in (search, plot, convert, tag, get_time, ping)))
SPECS = {t.name: t for t in TOOLS.tools}
VALIDATORS = {t.name: jsonschema.Draft202012Validator(t.parameters) for t in TOOLS.tools}

WORDS = ["Paris", "Zürich HB", "rust async", "SELECT * FROM t WHERE a = 'x'", 'say "hi"', "a,b;c", "{x}",
         "[y]", "</tool_call>", "</parameter>", "x\\y", "漢字", "", " ", "true", "42", "null", "Action: ping",
         "[TOOL_CALLS]", "<|python_tag|>", "f(a=1)", "\n"]
CHARS = "abcxyz ÄéΩ漢.,;!?'\"\n\t{}[]()<>:=\\/0123456789"
UNKNOWN = ["get_wether", "serach", "rm_rf", "search.v2", "plot_", "Search", "a" * 40, "x"]
WRONG = ["abc", "3", "true", "1.5", None, [], {}, 1.5, -1, True, False, "", [1, "a"], {"a": 1}, float("nan"),
         10**30, "celsius"]
FRAGMENTS = ["<tool_call>", "</tool_call>", "<function=get_time>", "</function>", "<parameter=timezone>",
             "</parameter>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "<｜tool▁calls▁begin｜>",
             "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "Action: ",
             "Action Input: ", "Thought: ", '{"name": "get_time", ', '"parameters": ', '"arguments": ',
             '{"timezone": "UTC"}', "[get_time(", "timezone=", "'x'", ")]", "{", "}", "[", "]", "(", ")", '"',
             "'", "\\", ",", ";", ":", "\n", "```json", "```", "true", "None", "1e5", "get_time", "ping", "\x00"]
CONTENT = ["", "Let me check.", "Thinking: {not json}", "I'll call [two] tools: now.", "Sure!\n\n", "ok"]


def rand_str(rng: random.Random) -> str:
    if rng.random() < 0.7:
        return rng.choice(WORDS)
    return "".join(rng.choice(CHARS) for _ in range(rng.randint(0, 16)))


def value_for(schema: dict, rng: random.Random):
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return rand_str(rng)
    if kind == "integer":
        return rng.choice([0, 1, -7, 10**12, rng.randint(-1000, 1000)])
    if kind == "number":
        return rng.choice([0.5, -2.0, 1e-9, 3, rng.uniform(-1e6, 1e6)])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [value_for(schema.get("items", {"type": "string"}), rng) for _ in range(rng.randint(0, 3))]
    return rand_str(rng)


def valid_call(rng: random.Random) -> ToolCall:
    spec = rng.choice(TOOLS.tools)
    props, required = spec.parameters.get("properties", {}), spec.parameters.get("required", [])
    args = {k: value_for(s, rng) for k, s in props.items() if k in required or rng.random() < 0.5}
    return ToolCall(name=spec.name, arguments=args)


def bad_call(rng: random.Random) -> tuple[ToolCall, str]:
    call = valid_call(rng)
    args = dict(call.arguments)
    how = rng.choice(["unknown_tool", "wrong_type", "missing", "extra"])
    if how == "unknown_tool":
        return ToolCall(name=rng.choice(UNKNOWN), arguments=args), how
    if how == "wrong_type" and args:
        args[rng.choice(sorted(args))] = rng.choice(WRONG)
    elif how == "missing" and args:
        del args[rng.choice(sorted(args))]
    else:
        how = "extra"
        args[rng.choice(["bogus", "limit ", "Query", "values2"])] = rand_str(rng)
    return ToolCall(name=call.name, arguments=args), how


# -- damage ------------------------------------------------------------------------------------------

def _at(rng: random.Random, text: str) -> int:
    return rng.randint(0, len(text))


def truncate(rng, text):
    return text[:_at(rng, text)]


def drop_bracket(rng, text):
    spots = [i for i, ch in enumerate(text) if ch in "{}[]()<>"]
    if not spots:
        return text[:-1]
    i = rng.choice(spots)
    return text[:i] + text[i + 1:]


def add_bracket(rng, text):
    i = _at(rng, text)
    return text[:i] + rng.choice("{}[]()<>") + text[i:]


def break_json(rng, text):
    swaps = [('"', "'"), (":", ""), (",", ""), ("}", ",}"), ("]", ",]"), ("true", "True"), ("false", "False"),
             ('"', ""), ("\\", ""), (": ", ": :"), ("null", "None"), ("{", "{{")]
    old, new = rng.choice(swaps)
    spots = [m.start() for m in re.finditer(re.escape(old), text)]
    if not spots:
        return text + new
    i = rng.choice(spots)
    return text[:i] + new + text[i + len(old):]


def extra_after(rng, text):
    return text + rng.choice([" and more", "}", "]]", '{"a": 1}', ",", "\n```", "</tool_call>", ")", "\x00",
                              '{"name": "ping", "arguments": {}}', "Extra data: 1 2 3", " null"])


def concatenate(rng, text):
    joined = re.sub(r"\}\s*[,;]?\s*\{", "}{", text)
    return joined if joined != text else text + text.strip()


def nul(rng, text):
    for _ in range(rng.randint(1, 3)):
        i = _at(rng, text)
        text = text[:i] + "\x00" + text[i:]
    return text


def bad_utf8(rng, text):
    data = bytearray(text.encode("utf-8", errors="surrogateescape"))
    for _ in range(rng.randint(1, 4)):
        i = rng.randint(0, len(data))
        data[i:i] = rng.choice([b"\x80", b"\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f", b"\xed\xa0\x80", b"\xc0\xaf"])
    if rng.random() < 0.3 and len(data) > 1:  # cut inside a multi-byte character
        data = data[:rng.randint(0, len(data))]
    return bytes(data).decode("utf-8", errors=rng.choice(["surrogateescape", "replace"]))


def mix_markers(rng, text):
    for _ in range(rng.randint(1, 3)):
        i = _at(rng, text)
        text = text[:i] + rng.choice(FRAGMENTS) + text[i:]
    return text


def splice(rng, text):
    if len(text) < 2:
        return text + text
    a = rng.randint(0, len(text) - 1)
    b = rng.randint(a, len(text))
    i = _at(rng, text)
    return text[:i] + text[a:b] + text[i:]


DAMAGE = [truncate, drop_bracket, add_bracket, break_json, extra_after, concatenate, nul, bad_utf8, mix_markers,
          splice]


def make_input(rng: random.Random, i: int, dialect: str) -> tuple[str, str]:
    """One fuzz input for ``dialect`` and a short label of how it was made."""
    if i % DEEP_EVERY == 3:
        depth = rng.choice([2_000, 20_000, 200_000])
        opener = rng.choice(["[", "{\"a\": ", "(", "[get_time(timezone="])
        body = get_dialect(dialect).render_assistant("", [ToolCall(name="ping", arguments={})])
        return body.replace("{}", opener * depth, 1) if "{}" in body else body + opener * depth, f"deep{depth}"
    if rng.random() < 0.05:
        return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 30))), "fragments"
    labels: list[str] = []
    source = dialect if rng.random() < 0.75 else rng.choice(sorted(DIALECTS))
    if source != dialect:
        labels.append(f"from:{source}")
    calls = []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.6:
            calls.append(valid_call(rng))
        else:
            call, how = bad_call(rng)
            calls.append(call)
            labels.append(how)
    if i % BIG_EVERY == 1:
        big = ("ab{c}[d]\"e\\f'g<h>: " * 60_000)[:1_000_000]
        calls[0] = ToolCall(name="search", arguments={"query": big})
        labels.append("1MB")
    text = get_dialect(source).render_assistant(rng.choice(CONTENT), calls)
    for _ in range(rng.choice([0, 1, 1, 1, 2, 2, 3]) if i % BIG_EVERY != 1 else 1):
        damage = rng.choice(DAMAGE)
        text = damage(rng, text)
        labels.append(damage.__name__)
    return text, ",".join(labels) or "clean"


# -- checks ---------------------------------------------------------------------------------------------

def problems(res, text: str) -> list[str]:
    """Invariant violations of one ParseResult for the raw ``text``."""
    out = []
    if not res.calls and not res.errors:
        out.append("neither calls nor errors")
    for e in res.errors:
        if e.kind not in KINDS or not e.message.strip():
            out.append(f"untyped error {e!r}")
    inferred = {m.group(1) for r in res.repairs if r.kind == "bare_input"
                for m in [re.search(r"taken as '(\w+)'", r.detail)] if m}
    for call in res.calls:
        if call.name not in SPECS:
            out.append(f"dispatched unknown tool {call.name!r}")
            continue
        errs = list(VALIDATORS[call.name].iter_errors(call.arguments))
        if errs:
            out.append(f"{call.name} fails its schema: {errs[0].message}")
        # ReAct's recorded bare_input puts plain text under the single string parameter's name.
        invented = [k for k in call.arguments if k not in text and k not in inferred]
        if invented:
            out.append(f"{call.name}: argument keys {invented} are not in the raw text")
    return out


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")  # ast on fuzzed escapes
def test_fuzz_malformed_outputs_never_raise_and_never_dispatch_invented_arguments():
    rng = random.Random(SEED)
    names = sorted(DIALECTS)
    dialects = {n: get_dialect(n) for n in names}
    failures: list[str] = []
    seen: Counter = Counter()
    for i in range(N):
        name = names[i % len(names)]
        text, how = make_input(rng, i, name)
        try:
            res = dialects[name].parse(text, TOOLS)
        except Exception as e:  # noqa: BLE001 - the point of the test
            failures.append(f"#{i} {name} [{how}] raised {type(e).__name__}: {str(e)[:200]} | {text[:300]!r}")
            continue
        for p in problems(res, text):
            failures.append(f"#{i} {name} [{how}] {p} | {text[:300]!r}")
        seen["accepted calls"] += len(res.calls)
        seen["inputs with a call"] += bool(res.calls)
        seen.update(f"error:{e.kind}" for e in res.errors)
        seen.update(f"repair:{r.kind}" for r in res.repairs)
    print(f"\nfuzz: {N} inputs over {len(names)} dialects; " + ", ".join(f"{k}={v}" for k, v in sorted(seen.items())))
    assert not failures, f"{len(failures)} failures; first ones:\n" + "\n".join(failures[:15])
    # The inputs really exercise every outcome, not just one error path.
    assert all(seen[f"error:{k}"] for k in KINDS), seen
    assert seen["inputs with a call"] > N // 20, seen
