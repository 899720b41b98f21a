"""Hostile model output (issue 15, item 1): every dialect, the stream parser and ``DeltaAccumulator``
return a typed result for any input — never raise — in bounded, linear time, and whatever they
return is storable as UTF-8 JSON.

Each case runs under a time budget (``within``): the quadratic paths this suite was written
against took seconds at these sizes, the budgets allow for a busy 2-core machine. Inputs stay
under the reply cap (256K characters) unless a case is about the cap; the 1 MB scaling is
measured by ``benchmarks/parse.py``.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajforge.parse import DIALECTS, DeltaAccumulator, Dialect, ParseResult, StreamParser, get_dialect
from trajforge.parse.base import INTERNAL_ERROR
from trajforge.parse.limits import MAX_DEPTH, MAX_ERRORS, MAX_REPLY_CHARS, REPAIR_LIMIT
from trajforge.parse.openai import parse_tool_calls
from trajforge.schema import ToolCall, ToolSpec, Toolset

KINDS = {"no_call", "malformed", "unknown_tool", "invalid_args", "truncated"}
NAMES = sorted(DIALECTS)
TEXT = [n for n in NAMES if n != "openai"]


def note(text: str, count: int = 0, scores: list[float] = [], data: dict = {}) -> str:  # noqa: B006
    """Keep a note."""


def ping() -> str:
    """Check the service."""


# ``free`` takes any JSON value: nothing in its schema stops a value the store cannot hold.
# ``nested`` takes any array or object (qwen3_xml reads such a value as JSON; an untyped one is text).
TOOLS = Toolset(tools=(ToolSpec.from_function(note), ToolSpec.from_function(ping),
                       ToolSpec(name="free", description="Takes anything.",
                                parameters={"type": "object", "properties": {"v": {}}}),
                       ToolSpec(name="nested", description="Takes a structure.", parameters={
                           "type": "object", "properties": {"v": {"anyOf": [{"type": "array"}, {"type": "object"}]}}})))


@contextmanager
def within(seconds: float):
    t0 = time.perf_counter()
    yield
    took = time.perf_counter() - t0
    assert took < seconds, f"took {took:.2f} s (budget {seconds} s)"


def storable(res: ParseResult) -> ParseResult:
    """The invariants of any result: typed, never the backstop, and valid UTF-8 JSON both ways."""
    assert res.calls or res.errors
    for e in res.errors:
        assert e.kind in KINDS and e.message.strip()
        assert INTERNAL_ERROR not in e.message, e.message  # a parser bug, caught by the backstop
        assert len(e.message) < 1500 and len(e.tool or "") <= 200  # it goes back into the model's context
    assert all(len(r.detail) < 500 for r in res.repairs)
    assert len(res.errors) <= MAX_ERRORS
    json.dumps(res.model_dump(), ensure_ascii=False, allow_nan=False).encode("utf-8")
    res.model_dump_json().encode("utf-8")
    return res


def parse(name: str, text, max_chars: int | None = MAX_REPLY_CHARS) -> ParseResult:
    return storable(get_dialect(name, max_chars=max_chars).parse(text, TOOLS))


def with_value(name: str, raw: str, arg: str = "v") -> str:
    """A call rendered by the dialect with ``raw`` written where the value of ``arg`` goes (raw
    JSON; a raw Python literal for pythonic; raw text for qwen3_xml, whose untyped values stay
    text). ``v`` is ``free``'s value (anything), ``nested`` is ``nested``'s, ``scores`` and ``data``
    are ``note``'s typed ones."""
    d = get_dialect(name)
    call = ToolCall(name="free", arguments={"v": "@@"}) if arg == "v" else \
        ToolCall(name="nested", arguments={"v": "@@"}) if arg == "nested" else \
        ToolCall(name="note", arguments={"text": "t", arg: "@@"})
    text = d.render_assistant("", [call])
    if name == "pythonic":
        return text.replace("'@@'", raw)
    if name == "qwen3_xml":
        return text.replace("@@", raw)
    if name == "openai":  # the value sits in the arguments JSON string: escape it for that string
        return text.replace('\\"@@\\"', json.dumps(raw)[1:-1])
    return text.replace('"@@"', raw)


def values(res: ParseResult, arg: str = "v") -> list:
    return [c.arguments.get(arg) for c in res.calls]


# -- numbers ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_integer_past_the_int_string_limit_is_typed_or_kept_as_text(name):
    digits = "7" * 5000  # Python refuses to convert more than 4300 digits
    with within(2):
        as_number = parse(name, with_value(name, f"[{digits}]", "scores"))
        anything = parse(name, with_value(name, digits))
    assert not as_number.calls and as_number.errors
    # Where the schema takes any value the digits may come back as text (recorded, or as written
    # for qwen3_xml), never as a number the store cannot write.
    assert anything.errors or values(anything) == [digits]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e999", "2e400"])
def test_numbers_json_cannot_hold_are_errors(name, raw):
    with within(1):
        res = parse(name, with_value(name, f"[1, {raw}]", "scores"))
    assert not res.calls and res.errors


def test_a_numeric_string_that_reads_as_infinite_is_not_coerced():
    raw = '<tool_call>{"name": "note", "arguments": {"text": "x", "scores": [1], "count": "%s"}}</tool_call>'
    for text in ("nan", "inf", "-Infinity", "1e999"):
        res = parse("hermes", raw % text)
        assert not res.calls and [e.kind for e in res.errors] == ["invalid_args"]


# -- nesting ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 900, 100_000])
def test_deep_nesting_is_an_error_at_any_depth(name, depth):
    with within(2):
        closed = parse(name, with_value(name, "[" * depth + "]" * depth, "nested"))
        parse(name, with_value(name, "[" * depth, "nested"))  # unclosed: json-repair may read it as []
    assert not closed.calls and closed.errors
    if depth == MAX_DEPTH + 1:  # readable, and refused for its depth alone
        assert "nested deeper than" in closed.errors[0].message


@pytest.mark.parametrize("name", NAMES)
def test_nesting_within_the_limit_is_a_call(name):
    depth = MAX_DEPTH - 2
    res = parse(name, with_value(name, "[" * depth + "1" + "]" * depth))
    assert len(res.calls) == 1 and not res.errors


def test_deep_objects_in_an_openai_stream_are_an_error():
    acc = DeltaAccumulator()
    args = '{"v": ' + '{"a": ' * 2000 + "1" + "}" * 2001
    acc.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "free", "arguments": args}}]}}]})
    res = storable(acc.finish(TOOLS))
    assert not res.calls and res.errors


# -- text that is not valid UTF-8 -------------------------------------------------------------

@pytest.mark.parametrize("name", [n for n in NAMES if n not in ("pythonic", "qwen3_xml")])
def test_lone_surrogate_escapes_are_repaired_and_recorded(name):
    res = parse(name, with_value(name, '"a\\ud83d b \\udc00 c \\ud83d\\ude00"'))
    assert values(res) == ["a\ufffd b \ufffd c \U0001f600"]
    assert "lone_surrogate" in [r.kind for r in res.repairs]


def test_lone_surrogates_in_python_literals_are_repaired():
    res = parse("pythonic", "[free(v='x\\ud83d y \\U0000dc00')]")
    assert values(res) == ["x\ufffd y \ufffd"] and "lone_surrogate" in [r.kind for r in res.repairs]


@pytest.mark.parametrize("name", NAMES)
def test_surrogates_and_invalid_bytes_in_the_text_itself(name):
    call = get_dialect(name).render_assistant("Thinking \ud800 here.", [ToolCall(name="ping")])
    res = parse(name, call + " tail \udcff")
    assert "\ud800" not in res.text
    raw = call.encode("utf-8", "surrogatepass") + b" \xff\xfe \xc3"  # bytes as a server might send them
    parse(name, raw)
    parse(name, raw.decode("utf-8", "surrogateescape"))


JSON_NAMES = [n for n in NAMES if n not in ("pythonic", "qwen3_xml")]


@pytest.mark.parametrize("name", JSON_NAMES)
def test_escaped_surrogates_in_tool_names_and_argument_keys(name):
    d = get_dialect(name)
    if name not in ("react", "deepseek"):  # those two write the name as plain text, not JSON
        unknown = parse(name, d.render_assistant("", [ToolCall(name="x@@", arguments={"v": 1})])
                        .replace("@@", "\\ud83d"))
        assert [e.kind for e in unknown.errors] == ["unknown_tool"] and unknown.errors[0].tool == "x\ufffd"
    keyed = parse(name, d.render_assistant("", [ToolCall(name="free", arguments={"v": 1, "k@@": 2})])
                  .replace("@@", "\\udc00"))
    assert keyed.calls[0].arguments == {"v": 1, "k\ufffd": 2} and "lone_surrogate" in [r.kind for r in keyed.repairs]


@pytest.mark.parametrize("name", NAMES)
def test_raw_surrogates_in_names_and_keys(name):
    d = get_dialect(name)
    res = parse(name, d.render_assistant("", [ToolCall(name="f\ud83d", arguments={"\udc00": 1})]))
    assert not res.calls and res.errors and all("\ud83d" not in (e.tool or "") for e in res.errors)


@pytest.mark.parametrize("name", NAMES)
def test_control_characters_are_text_or_repaired(name):
    raw = '"line one\nline\ttwo \x00 \x1b[31m red"'  # raw control characters inside a JSON string
    res = parse(name, with_value(name, raw) + "\x00\x07")
    assert res.calls or res.errors
    if name not in ("pythonic", "qwen3_xml") and res.calls:
        assert values(res) == ["line one\nline\ttwo \x00 \x1b[31m red"] and res.repairs


# -- values Python literals can hold and JSON cannot -------------------------------------------

@pytest.mark.parametrize("raw", ["b'x'", "1j", "...", "{(1, 2): 3}", "{1: 2}", "[None, {True: 1}]", "frozenset()"])
def test_pythonic_literals_that_are_not_json_are_errors(raw):
    res = parse("pythonic", f"[free(v={raw})]")
    assert not res.calls and res.errors


def test_pythonic_tuples_become_lists_and_long_dotted_names_are_errors():
    assert values(parse("pythonic", "[free(v=(1, (2, 3)))]")) == [[1, [2, 3]]]
    for dots in (500, 20_000):  # ast.unparse recursed once per dot
        with within(2):
            res = parse("pythonic", "[" + "a." * dots + "b(v=1)]")
        assert not res.calls and res.errors and len(res.errors[0].message) < 1000


@pytest.mark.parametrize("name", NAMES)
def test_a_huge_tool_name_or_key_makes_a_short_message(name):
    d = get_dialect(name)
    long = "x" * 100_000
    with within(2):
        parse(name, d.render_assistant("", [ToolCall(name=long, arguments={"v": 1})]))
        parse(name, d.render_assistant("", [ToolCall(name="note", arguments={"text": "t", long: 1})]))
        parse(name, d.render_assistant("", [ToolCall(name="a." * 50_000 + "b", arguments={"v": 1})]))


# -- the size cap -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_a_reply_over_the_cap_is_truncated_without_being_read(name):
    text = get_dialect(name).render_assistant("", [ToolCall(name="note", arguments={"text": "x" * MAX_REPLY_CHARS})])
    with within(0.5):
        res = parse(name, text)
    assert [e.kind for e in res.errors] == ["truncated"] and "limit" in res.errors[0].message and not res.calls
    assert parse(name, text, max_chars=None).calls  # the cap is configurable, and the text was fine
    small = get_dialect(name, max_chars=100).parse(text[:200], TOOLS)
    assert [e.kind for e in small.errors] == ["truncated"]


def test_structured_calls_and_streams_over_the_cap_are_truncated():
    big = json.dumps({"text": "x" * MAX_REPLY_CHARS})
    res = storable(parse_tool_calls([{"function": {"name": "note", "arguments": big}}], None, TOOLS))
    assert [e.kind for e in res.errors] == ["truncated"]
    acc = DeltaAccumulator()
    with within(2):
        acc.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "note", "arguments": ""}}]}}]})
        for _ in range(40_000):  # ~360K characters in small fragments
            acc.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "xxxxxxxxx"}}]}}]})
        res = storable(acc.finish(TOOLS))
    assert [e.kind for e in res.errors] == ["truncated"]


# -- shapes that used to be quadratic (and json-repair's worst inputs) --------------------------

OPENERS = {
    "hermes": ["<tool_call>", "<tool_call>{", '<tool_call>{"name": "note", "arguments": {"text": "'],
    "qwen3_xml": ["<tool_call>", "<function=", "<tool_call><function=note><parameter=text>x"],
    "deepseek": ["<｜tool▁call▁begin｜>", "<｜tool▁call▁begin｜>function<｜tool▁sep｜>note\n```json\n{"],
    "llama3_json": ['{"name": ', '{"name": "note", "parameters": {'],
    "mistral": ["[TOOL_CALLS]", "[TOOL_CALLS]note[ARGS]{", "[TOOL_CALLS]note"],
    "pythonic": ["[note(", "[note(text='", "[a."],
    "react": ["Action: note\n", "Action: note\nAction Input: {", "Action:" + " " * 200 + "x\n"],
    "openai": ['{"tool_calls": [', '[{"function": ', '{"tool_calls": [{"function": {"name": "note", "arguments": "{'],
}


@pytest.mark.parametrize("name", NAMES)
def test_repeated_unclosed_openers_are_linear(name):
    for unit in OPENERS[name]:
        text = (unit * (100_000 // len(unit) + 1))[:100_000]
        with within(3):  # each took 1.5-5 s at this size before (quadratic), ~0.1-0.5 s now
            res = parse(name, text)
        assert res.errors and len(res.errors) <= MAX_ERRORS


@pytest.mark.parametrize("name", NAMES)
def test_many_broken_calls_that_only_json_repair_reads_stay_within_its_budget(name):
    # '{"' repeated is json-repair's worst case (~0.3 s at 2,000 characters); a few hundred of
    # them in one reply would take minutes without the per-parse budget.
    one = with_value(name, '{"' * 900, "data")
    with within(4):
        res = parse(name, "\n".join([one] * 120))
    assert res.errors  # whatever json-repair makes of the first one, the rest are malformed


def test_damaged_json_past_the_repair_limit_is_malformed_fast():
    body = "{text: " + '"x", ' * (REPAIR_LIMIT // 5) + "}"  # unquoted key: only json-repair reads it
    with within(1):
        res = parse("hermes", f'<tool_call>{{"name": "note", "arguments": {body}}}</tool_call>')
    assert [e.kind for e in res.errors] == ["malformed"]


def test_thousands_of_errors_are_listed_up_to_the_cap():
    res = parse("hermes", "<tool_call>nope</tool_call>" * 5000)
    assert len(res.errors) == MAX_ERRORS and "4,968 more" in res.errors[-1].message


# -- the backstop ------------------------------------------------------------------------------

class Broken(Dialect):
    name = "broken"

    def _parse(self, text, toolset):
        raise RecursionError("a bug in a dialect")


def test_an_exception_in_a_dialect_is_a_typed_error_not_a_crash():
    res = Broken().parse("anything", TOOLS)
    assert [e.kind for e in res.errors] == ["malformed"] and INTERNAL_ERROR in res.errors[0].message


# -- streams -----------------------------------------------------------------------------------

def test_delta_accumulator_never_raises_on_garbage_chunks():
    acc = DeltaAccumulator()
    for chunk in [None, 3, "x", [], {"choices": "x"}, {"choices": [None]}, {"choices": [{"delta": 5}]},
                  {"choices": [{"delta": {"tool_calls": 7}}]}, {"choices": [{"delta": {"tool_calls": [None, 1]}}]},
                  {"choices": [{"delta": {"tool_calls": [{"index": [1], "function": {}}]}}]},
                  {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": [1]}]}}]},
                  {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c\ud83d", "function": {
                      "name": "ping", "arguments": "{}"}}]}}]},
                  {"choices": [{"delta": {"content": "hi \udc80"}, "finish_reason": "tool_calls"}]}]:
        acc.feed(chunk)
    res = storable(acc.finish(TOOLS))
    assert [c.name for c in res.calls] == ["ping"] and res.calls[0].id == "c\ufffd"
    assert "malformed" in [e.kind for e in res.errors] and res.text == "hi \ufffd"


def test_delta_accumulator_is_linear_in_the_number_of_fragments():
    acc = DeltaAccumulator()
    acc.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "note", "arguments": ""}}]}}]})
    pieces = ['{"text": "'] + ["ab"] * 100_000 + ['"}']
    with within(3):
        for p in pieces:
            acc.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": p}}]}}]})
        res = storable(acc.finish(TOOLS))
    assert res.calls[0].arguments == {"text": "ab" * 100_000}


@pytest.mark.parametrize("name", NAMES)
def test_stream_parser_snapshots_every_token_in_linear_time(name):
    text = get_dialect(name).render_assistant("x" * 60_000, [ToolCall(name="note", arguments={"text": "y" * 60_000})])
    stream = StreamParser(get_dialect(name), TOOLS)
    with within(6):
        for i in range(0, len(text), 4):  # a snapshot after every 4-character "token"
            stream.feed(text[i:i + 4])
            stream.snapshot
        res = storable(stream.finish())
    assert res == get_dialect(name).parse(text, TOOLS) and len(res.calls) == 1


def test_stream_parser_joins_utf8_bytes_split_inside_a_character():
    text = get_dialect("hermes").render_assistant("Zürich 漢字 😀", [ToolCall(name="note", arguments={"text": "é😀"})])
    data = text.encode("utf-8")
    stream = StreamParser(get_dialect("hermes"), TOOLS)
    for i in range(len(data)):
        stream.feed(data[i:i + 1])
    assert stream.finish() == get_dialect("hermes").parse(text, TOOLS)
    cut = StreamParser(get_dialect("hermes"), TOOLS)
    cut.feed(data + b"\xf0\x9f")  # ends inside a character
    assert storable(cut.finish()).text.endswith("\ufffd")


# -- properties over arbitrary text ------------------------------------------------------------

FRAGMENTS = ["<tool_call>", "</tool_call>", "<function=note>", "<parameter=text>", "</parameter>", "</function>",
             "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
             "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "Action: ", "Action Input: ", '{"name": "note", ',
             '"arguments": ', '"parameters": ', '{"text": "x"}', "[note(", "text=", ")]", '{"tool_calls": [',
             '"function": ', "{", "}", "[", "]", '"', "'", "\\", "\\ud83d", "1e999", "NaN", "9" * 5000, "\n", ","]
ANY_CHAR = st.one_of(st.characters(), st.characters(categories=["Cs", "Cc", "Cf"]))  # surrogates included
HOSTILE_TEXT = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(ANY_CHAR, max_size=12)), max_size=40).map("".join)
PROPERTIES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", NAMES)
def test_any_text_gives_a_storable_result(name):
    dialect = get_dialect(name)

    @PROPERTIES
    @given(HOSTILE_TEXT)
    def check(text):
        storable(dialect.parse(text, TOOLS))

    with within(10):
        check()


@pytest.mark.parametrize("name", NAMES)
def test_streaming_equals_one_shot_on_any_text_and_any_chunking(name):
    dialect = get_dialect(name)

    @PROPERTIES
    @given(HOSTILE_TEXT, st.lists(st.integers(0, 10_000), max_size=8))
    def check(text, cuts):
        points = sorted({c % (len(text) + 1) for c in cuts})
        stream = StreamParser(dialect, TOOLS)
        for a, b in zip([0] + points, points + [len(text)]):
            stream.feed(text[a:b])
            storable(stream.snapshot)
        assert stream.finish() == dialect.parse(text, TOOLS)

    with within(10):
        check()
