"""The openai dialect (parse/openai.py; named apart from tests/policies/test_openai.py, as pytest
imports test files by basename): API messages in, validated calls out; streamed deltas agree with
whole messages."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajforge.parse import DeltaAccumulator, get_dialect
from trajforge.parse.openai import parse_tool_calls
from trajforge.schema import Message, ToolCall, ToolSpec, Toolset


def search(query: str, limit: int = 10, exact: bool = False) -> str:
    """Search documents."""


def get_time(timezone: str) -> str:
    """Current time."""


def ping() -> str:
    """Check the service."""


TOOLS = Toolset(tools=tuple(ToolSpec.from_function(f) for f in (search, get_time, ping)))
D = get_dialect("openai")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def tc(name, arguments, call_id="call_1"):
    args = arguments if not isinstance(arguments, dict) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def kinds(res):
    return [e.kind for e in res.errors], [r.kind for r in res.repairs]


# -- parsing messages ----------------------------------------------------------------------------

def test_message_calls_keep_their_ids_and_content():
    msg = {"role": "assistant", "content": "Looking.",
           "tool_calls": [tc("search", {"query": "rust"}, "call_a"), tc("get_time", {"timezone": "UTC"}, "call_b")]}
    res = D.parse_message(msg, TOOLS, "tool_calls")
    assert res.calls == [ToolCall(name="search", arguments={"query": "rust"}, id="call_a"),
                         ToolCall(name="get_time", arguments={"timezone": "UTC"}, id="call_b")]
    assert res.text == "Looking." and res.strictly_valid


@pytest.mark.parametrize("arguments,calls,errors,repairs", [
    ('{"query": "x", "limit": "5"}', [{"query": "x", "limit": 5}], [], ["coerce_type"]),
    ("{'query': 'x',}", [{"query": "x"}], [], ["json_repair"]),
    ('"{\\"query\\": \\"x\\"}"', [{"query": "x"}], [], ["double_encoded"]),
    ({"query": "x"}, [{"query": "x"}], [], []),  # some servers send the object itself
    ('{"query": "x"', [], ["truncated"], []),  # stops inside the object: never completed by guessing
    ("query=x", [], ["malformed"], []),
    ("[1, 2]", [], ["invalid_args"], []),
    ('{"limit": 3}', [], ["invalid_args"], []),
    ('{"query": "x", "bogus": 1}', [], ["invalid_args"], []),
])
def test_arguments_strings_are_repaired_with_a_record_or_rejected(arguments, calls, errors, repairs):
    res = parse_tool_calls([tc("search", arguments)], None, TOOLS)
    assert [c.arguments for c in res.calls] == calls
    assert kinds(res) == (errors, repairs)
    assert all(e.tool == "search" for e in res.errors)


def test_unknown_tool_names_the_closest_one():
    res = parse_tool_calls([tc("serach", {"query": "x"}), tc("get_time", {"timezone": "UTC"})], "", TOOLS)
    assert [c.name for c in res.calls] == ["get_time"]
    assert kinds(res) == (["unknown_tool"], []) and "'search'" in res.errors[0].message


def test_empty_arguments_only_for_a_tool_without_required_ones():
    assert parse_tool_calls([tc("ping", "")], "", TOOLS).calls == [ToolCall(name="ping", id="call_1")]
    assert kinds(parse_tool_calls([tc("get_time", "")], "", TOOLS)) == (["invalid_args"], [])


def test_finish_reason_length_makes_the_last_call_truncated():
    calls = [tc("get_time", {"timezone": "UTC"}, "a"), tc("search", '{"query": "rus', "b")]
    res = parse_tool_calls(calls, "", TOOLS, "length")
    assert [c.id for c in res.calls] == ["a"] and kinds(res) == (["truncated"], [])
    # Cut right after the name arrived: empty arguments are not "no arguments" here.
    assert kinds(parse_tool_calls([tc("ping", "")], "", TOOLS, "length")) == (["truncated"], [])
    # Cut before any call: truncated, not no_call.
    assert kinds(parse_tool_calls(None, "I will now call", TOOLS, "length")) == (["truncated"], [])


def test_other_message_shapes():
    legacy = {"role": "assistant", "content": None, "function_call": {"name": "ping", "arguments": "{}"}}
    assert D.parse_response(legacy, TOOLS).calls == [ToolCall(name="ping")]
    parts = {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    res = D.parse_response(parts, TOOLS)
    assert res.text == "ab" and kinds(res) == (["no_call"], [])
    assert kinds(D.parse_response({"name": "ping", "parameters": {}}, TOOLS)) == (["malformed"], [])
    assert kinds(D.parse_response({"role": "assistant", "tool_calls": [{"name": "ping"}, 3]}, TOOLS)) == (
        ["malformed", "malformed"], [])
    assert kinds(D.parse_response({"choices": []}, TOOLS)) == (["malformed"], [])


def test_text_forms():
    msg = json.dumps({"role": "assistant", "content": None, "tool_calls": [tc("ping", "{}")]})
    assert D.parse(msg, TOOLS).calls == [ToolCall(name="ping", id="call_1")]
    extra = D.parse(msg + "\ndata: [DONE]", TOOLS)
    assert extra.calls == [ToolCall(name="ping", id="call_1")] and kinds(extra) == ([], ["extra_data"])
    cut_after_calls = msg[:-1]  # the message's closing brace is missing; its calls are complete
    assert kinds(D.parse(cut_after_calls, TOOLS)) == ([], ["unclosed_json"])
    assert kinds(D.parse('{"role": "assistant", "content": "Let me', TOOLS)) == (["truncated"], [])
    plain = D.parse("The answer is 42.", TOOLS)
    assert plain.text == "The answer is 42." and kinds(plain) == (["no_call"], [])


# -- rendering: the request ----------------------------------------------------------------------

def test_request_messages_carry_tools_outside_the_prompt_and_answer_call_ids():
    calls = [ToolCall(name="get_time", arguments={"timezone": "UTC"}), ToolCall(name="ping")]
    msgs = [Message(role="system", content="Be brief."), Message(role="user", content="Time?"),
            Message(role="assistant", content="", tool_calls=calls),
            Message(role="tool", name="get_time", content="12:00"), Message(role="tool", name="ping", content="ok"),
            Message(role="tool", name="error", content="Error (no_call): ...")]
    chat = D.to_chat(msgs, TOOLS)
    assert chat[0] == {"role": "system", "content": "Be brief."}  # no tool block: tools go in the request
    assert D.system_prompt(TOOLS, "Be brief.") == "Be brief." and D.tools(TOOLS) == TOOLS.openai()
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert [c["id"] for c in chat[2]["tool_calls"]] == ["call_2_0", "call_2_1"]
    assert [m.get("tool_call_id") for m in chat[3:]] == ["call_2_0", "call_2_1", None]
    assert json.loads(chat[2]["tool_calls"][0]["function"]["arguments"]) == {"timezone": "UTC"}
    # What the request holds parses back to the calls (with the ids the request gave them).
    assert D.parse_message(chat[2], TOOLS).calls == [c.model_copy(update={"id": f"call_2_{k}"})
                                                     for k, c in enumerate(calls)]


def test_a_local_tokenizer_cannot_render_the_openai_dialect():
    with pytest.raises(ValueError, match="text dialect"):
        D.chat_text(object(), [Message(role="user", content="hi")], TOOLS)


# -- streaming: deltas ---------------------------------------------------------------------------

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
call = st.one_of(
    st.builds(lambda q, lim: ToolCall(name="search", arguments={"query": q, **({"limit": lim} if lim else {})}),
              text, st.one_of(st.none(), st.integers(1, 10**6))),
    st.builds(lambda tz: ToolCall(name="get_time", arguments={"timezone": tz}), text),
    st.just(ToolCall(name="ping")),
    st.just(ToolCall(name="nope", arguments={"x": 1})),  # an unknown tool: the same error either way
)


def _pieces(s: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(s) + 1) for c in cuts})
    return [s[a:b] for a, b in zip([0] + points, points + [len(s)])]


def chunks_for(message: dict, finish: str, draw) -> list[dict]:
    """The message as an OpenAI stream: a role chunk, content pieces, per call a head delta (id,
    name, empty arguments) then argument fragments; the calls' fragments interleaved at random
    (each call's own order kept), then the finish chunk."""
    out = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    for piece in _pieces(message["content"] or "", draw(st.lists(st.integers(0, 999), max_size=4))):
        out.append({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
    queues = []
    for k, c in enumerate(message.get("tool_calls", [])):
        head = {"index": k, "id": c["id"], "type": "function", "function": {"name": c["function"]["name"], "arguments": ""}}
        frags = _pieces(c["function"]["arguments"], draw(st.lists(st.integers(0, 999), max_size=6)))
        queues.append([head] + [{"index": k, "function": {"arguments": f}} for f in frags])
    while any(queues):
        q = draw(st.sampled_from([q for q in queues if q]))
        out.append({"choices": [{"index": 0, "delta": {"tool_calls": [q.pop(0)]}, "finish_reason": None}]})
    out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    out.append({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
    return out


@SETTINGS
@given(content=text, calls=st.lists(call, max_size=3), data=st.data())
def test_any_chunking_of_the_deltas_gives_the_whole_message_result(content, calls, data):
    ids = [f"call_{k}" for k in range(len(calls))]
    message = D.render_message(content, calls, ids)
    message.setdefault("tool_calls", [])
    finish = "tool_calls" if calls else "stop"
    acc = DeltaAccumulator()
    for chunk in chunks_for(message, finish, data.draw):
        acc.feed(chunk)
    assert acc.finish_reason == finish
    assert acc.finish(TOOLS) == D.parse_message(message, TOOLS, finish)
    known = [c.model_copy(update={"id": i}) for c, i in zip(calls, ids) if c.name != "nope"]
    assert acc.finish(TOOLS).calls == known


def test_a_stream_cut_by_the_length_limit_is_truncated_not_completed():
    acc = DeltaAccumulator()
    acc.feed({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "a", "type": "function", "function": {"name": "get_time", "arguments": ""}}]}}]})
    acc.feed({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": '{"timezone": "Europe/Par'}}]}}]})
    acc.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    assert kinds(acc.finish(TOOLS)) == (["truncated"], []) and not acc.finish(TOOLS).calls


def test_bare_deltas_are_accepted_too():
    acc = DeltaAccumulator()
    acc.feed({"content": "Hi. "})
    acc.feed({"tool_calls": [{"index": 0, "id": "x", "function": {"name": "ping", "arguments": "{"}}]})
    acc.feed({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]})
    assert acc.message == {"role": "assistant", "content": "Hi. ", "tool_calls": [
        {"type": "function", "function": {"name": "ping", "arguments": "{}"}, "id": "x"}]}
    assert acc.finish(TOOLS).calls == [ToolCall(name="ping", id="x")]


@pytest.mark.parametrize("arguments,kind", [
    ('"hello"', "invalid_args"),  # a JSON string, not an object: never read as "no arguments"
    ('"{not json at all"', "malformed"),
    ("hello", "malformed"),
])
def test_arguments_that_are_no_object_never_become_empty_arguments(arguments, kind):
    res = parse_tool_calls([tc("ping", arguments)], None, TOOLS)
    assert res.calls == [] and kinds(res) == ([kind], [])
