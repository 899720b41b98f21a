"""`trajforge parse` reads raw output on stdin and prints calls, errors, repairs and text as JSON."""

import json

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather.",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                   "required": ["location"], "additionalProperties": False}}}]


@pytest.fixture
def tools_file(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(TOOLS))
    return path


def run(args, stdin):
    res = CliRunner().invoke(app, ["parse", *args], input=stdin)
    return res


def test_parses_named_dialect(tools_file):
    res = run(["--dialect", "mistral", "--tools", str(tools_file)],
              'Sure.[TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Paris",}}]')
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["calls"] == [{"name": "get_weather", "arguments": {"location": "Paris"}}]
    assert out["errors"] == [] and out["text"] == "Sure."
    assert [r["kind"] for r in out["repairs"]] == ["json_repair"]


def test_auto_guesses_from_markers_and_reports_errors(tools_file):
    raw = "<tool_call>\n<function=get_wether>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>"
    out = json.loads(run(["--tools", str(tools_file)], raw).output)
    assert out["dialect"] == "qwen3_xml" and out["calls"] == []
    assert out["errors"][0]["kind"] == "unknown_tool" and "get_weather" in out["errors"][0]["message"]


def test_no_call_is_reported_not_failed(tools_file):
    out = json.loads(run(["--dialect", "hermes", "--tools", str(tools_file)], "It is sunny.").output)
    assert [e["kind"] for e in out["errors"]] == ["no_call"] and out["text"] == "It is sunny."


def test_unknown_dialect_and_bad_tools_exit_2(tools_file, tmp_path):
    assert run(["--dialect", "klingon", "--tools", str(tools_file)], "x").exit_code == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert run(["--dialect", "hermes", "--tools", str(bad)], "x").exit_code == 2


RESPONSE = {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\",}"}}]}}]}


@pytest.mark.parametrize("dialect", ["openai", "auto"])
def test_openai_response_json_on_stdin(tools_file, dialect):
    out = json.loads(run(["--dialect", dialect, "--tools", str(tools_file)], json.dumps(RESPONSE)).output)
    assert out["dialect"] == "openai"
    assert out["calls"] == [{"name": "get_weather", "arguments": {"location": "Paris"}, "id": "call_1"}]
    assert [r["kind"] for r in out["repairs"]] == ["json_repair"] and out["errors"] == []


def test_openai_choice_cut_by_the_length_limit(tools_file):
    choice = {"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Pa"}}]}}
    out = json.loads(run(["--dialect", "openai", "--tools", str(tools_file)], json.dumps(choice)).output)
    assert out["calls"] == [] and [e["kind"] for e in out["errors"]] == ["truncated"]
