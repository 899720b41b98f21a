import json

from trajforge.parse import get_dialect
from trajforge.schema import Message, ToolCall, ToolSpec, Toolset


def run_sql(query: str) -> str:
    """Run a query.

    Args:
        query: SQL text.
    """


def describe_table(table: str, limit: int = 5) -> str:
    """Describe a table.

    Args:
        table: Table name.
        limit: Sample rows.
    """


TOOLS = Toolset(tools=(ToolSpec.from_function(run_sql), ToolSpec.from_function(describe_table)))
H = get_dialect("hermes")


def test_render_then_parse_roundtrip():
    calls = [ToolCall(name="run_sql", arguments={"query": "SELECT 1"}),
             ToolCall(name="describe_table", arguments={"table": "orders", "limit": 3})]
    text = H.render_assistant("Let me look.", calls)
    res = H.parse(text, TOOLS)
    assert res.calls == calls and res.errors == [] and res.repairs == []
    assert res.text == "Let me look."
    assert res.strictly_valid


def test_system_prompt_lists_every_tool_as_json():
    prompt = H.system_prompt(TOOLS, "Be brief.")
    assert prompt.startswith("Be brief.")
    block = prompt.split("<tools>\n")[1].split("\n</tools>")[0]
    assert [json.loads(line)["function"]["name"] for line in block.splitlines()] == ["run_sql", "describe_table"]


def test_no_call_is_typed_error():
    res = H.parse("The answer is 42.", TOOLS)
    assert [e.kind for e in res.errors] == ["no_call"] and not res.calls
    assert res.text == "The answer is 42."


def test_repairs_are_recorded():
    text = "<tool_call>\n{'name': 'run_sql', 'arguments': {'query': 'SELECT 1',}}\n</tool_call>"
    res = H.parse(text, TOOLS)
    assert res.calls == [ToolCall(name="run_sql", arguments={"query": "SELECT 1"})]
    assert [r.kind for r in res.repairs] == ["json_repair"]
    assert res.valid and not res.strictly_valid


def test_missing_close_tag_at_end_is_repaired():
    res = H.parse('<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT 2"}}', TOOLS)
    assert res.calls[0].arguments == {"query": "SELECT 2"}
    assert "unclosed_tag" in [r.kind for r in res.repairs]


def test_truncated_call_is_error_not_guess():
    res = H.parse('<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT * FR', TOOLS)
    assert not res.calls and [e.kind for e in res.errors] == ["truncated"]


def test_unknown_tool_suggests_closest():
    res = H.parse('<tool_call>{"name": "run_sq", "arguments": {"query": "x"}}</tool_call>', TOOLS)
    assert res.errors[0].kind == "unknown_tool" and "'run_sql'" in res.errors[0].message


def test_invalid_arguments():
    missing = H.parse('<tool_call>{"name": "run_sql", "arguments": {}}</tool_call>', TOOLS)
    assert missing.errors[0].kind == "invalid_args" and "'query'" in missing.errors[0].message
    extra = H.parse('<tool_call>{"name": "run_sql", "arguments": {"query": "x", "db": 1}}</tool_call>', TOOLS)
    assert "unexpected argument 'db'" in extra.errors[0].message
    wrong = H.parse('<tool_call>{"name": "describe_table", "arguments": {"table": "t", "limit": "many"}}</tool_call>', TOOLS)
    assert wrong.errors[0].kind == "invalid_args" and "limit" in wrong.errors[0].message


def test_string_number_coerced_with_record():
    res = H.parse('<tool_call>{"name": "describe_table", "arguments": {"table": "t", "limit": "3"}}</tool_call>', TOOLS)
    assert res.calls[0].arguments["limit"] == 3
    assert res.repairs[0].kind == "coerce_type"


def test_malformed_json():
    res = H.parse("<tool_call>not json at all</tool_call>", TOOLS)
    assert res.errors[0].kind == "malformed"


def test_one_bad_call_does_not_hide_a_good_one():
    text = ('<tool_call>{"name": "nope", "arguments": {}}</tool_call>'
            '<tool_call>{"name": "run_sql", "arguments": {"query": "SELECT 1"}}</tool_call>')
    res = H.parse(text, TOOLS)
    assert [c.name for c in res.calls] == ["run_sql"] and [e.kind for e in res.errors] == ["unknown_tool"]


def test_to_chat_merges_tool_results_into_one_turn():
    msgs = [Message(role="system", content="S"), Message(role="user", content="U"),
            Message(role="assistant", content="", tool_calls=[ToolCall(name="run_sql", arguments={"query": "q"})]),
            Message(role="tool", name="run_sql", content="r1"), Message(role="tool", name="run_sql", content="r2")]
    chat = H.to_chat(msgs, TOOLS)
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user"]
    assert chat[3]["content"] == "<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response>"
    assert "<tools>" in chat[0]["content"]
