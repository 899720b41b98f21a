"""MCP-style environments: a tool-list JSON + a module of functions, run through the harness."""

from __future__ import annotations

import json
import textwrap

import pytest

from trajforge.envs import env_class, make_env
from trajforge.envs.mcp.env import mcp_env_class, read_tool_list
from trajforge.grade import graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies.expert import ExpertPolicy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.schema import Task, ToolCall

KV_TOOLS = [
    {"name": "put", "description": "Store a number under a key.",
     "inputSchema": {"type": "object", "properties": {
         "key": {"type": "string", "description": "Key name."},
         "value": {"type": "number", "description": "The number."}},
         "required": ["key", "value"]}},
    {"name": "get", "description": "Read the number stored under a key.",
     "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}},
                     "required": ["key"], "additionalProperties": False}},
    {"name": "add", "description": "Add two numbers.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "number"},
                                                      "b": {"type": "number"}},
                     "required": ["a", "b"]}},
    {"name": "submit", "description": "Submit the final answer.",
     "inputSchema": {"type": "object", "properties": {"answer": {"type": "number"}},
                     "required": ["answer"]}},
]

KV_MODULE = '''
from trajforge.envs import ToolError

final_tool = "submit"
instructions = "You manage a key-value store of numbers."


def make_state(task):
    return {"data": dict(task.entities.get("initial", {}))}


def put(state, key: str, value: float) -> str:
    state["data"][key] = value
    return f"stored {key}"


def get(state, key):
    if key not in state["data"]:
        raise ToolError(f"no key {key!r}; keys: {sorted(state['data'])}", kind="no_key")
    return {"key": key, "value": state["data"][key]}


def add(a, b):
    if a == 13:
        raise ZeroDivisionError("unlucky")  # undeclared: the model sees it, as its own error
    if a == 7:
        import trajforge_no_such_dependency  # a missing dependency is the environment's fault
    return a + b


def submit(state, answer):
    return "submitted"
'''


def write_env(tmp_path, tools=KV_TOOLS, module=KV_MODULE, stem="kv"):
    (tmp_path / f"{stem}.json").write_text(json.dumps(tools))
    (tmp_path / f"{stem}.py").write_text(textwrap.dedent(module))
    return f"mcp:{tmp_path / f'{stem}.json'}"


def kv_task(env: str, **extra) -> Task:
    reference = (ToolCall(name="put", arguments={"key": "x", "value": 4}),
                 ToolCall(name="get", arguments={"key": "y"}),
                 ToolCall(name="add", arguments={"a": 4, "b": 5}),
                 ToolCall(name="submit", arguments={"answer": 9}))
    fields = dict(id="kv-1", env=env, prompt="Store x=4, add it to y and submit the sum.",
                  tier="easy", split="train", template="kv", reference=reference, expected=9,
                  entities={"initial": {"y": 5}})
    return Task(**{**fields, **extra})


def call(name, **args):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


def test_toolset_comes_from_the_json_and_dispatches_to_the_module(tmp_path):
    name = write_env(tmp_path)
    cls = env_class(name)
    assert cls is env_class(name)  # built once per file version
    ts = cls.toolset()
    assert ts.names == ["put", "get", "add", "submit"]
    assert ts.get("put").parameters == KV_TOOLS[0]["inputSchema"]  # exactly the user's schema
    env = make_env(name)
    assert env.toolset() == ts and env.name == name and env.final_tool == "submit"
    assert env.instructions == "You manage a key-value store of numbers."
    env.reset(kv_task(name))
    assert env.execute(ToolCall(name="put", arguments={"key": "x", "value": 4})).content == "stored x"
    got = env.execute(ToolCall(name="get", arguments={"key": "x"}))
    assert json.loads(got.content) == {"key": "x", "value": 4}
    missing = env.execute(ToolCall(name="get", arguments={"key": "zz"}))
    assert not missing.ok and missing.error == "no_key" and "keys: ['x', 'y']" in missing.content
    crash = env.execute(ToolCall(name="add", arguments={"a": 13, "b": 1}))
    assert not crash.fault and crash.error == "tool_exception" and "ZeroDivisionError: unlucky" in crash.content
    missing = env.execute(ToolCall(name="add", arguments={"a": 7, "b": 1}))
    assert missing.fault and missing.error == "missing_dependency"
    assert "trajforge_no_such_dependency" in missing.content
    extra = env.execute(ToolCall(name="put", arguments={"key": "k", "value": 1, "note": "hi"}))
    assert extra.error == "invalid_args" and "'note'" in extra.content  # schema allowed, fn can't


def test_expert_and_scripted_episodes_through_the_harness(tmp_path):
    name = write_env(tmp_path)
    task = kv_task(name, reasoning=("Store x.", "Read y.", "Add them.", "Submit the sum."))
    [t] = run_episodes([task], ExpertPolicy())
    assert t.verdict.correct and t.end == "submitted" and t.env == name
    assert t.toolset_fingerprint == env_class(name).toolset().fingerprint
    assert t.verdict.milestones == ["put", "get", "add", "submit"]
    assert "Read y." in t.messages[4].content
    assert graded(t).outcome.tier == "success"

    script = [call("put", key="x", value="four"),   # schema: value must be a number
              call("get", key="x", extra=1),        # schema: additionalProperties false
              call("get", key="nope"),              # the module's ToolError
              call("submit", answer=8)]             # wrong answer
    [bad] = run_episodes([task], ScriptedPolicy(script), HarnessConfig(max_turns=6))
    errors = [e.kind for s in bad.steps for e in s.errors]
    assert errors == ["invalid_args", "invalid_args"]
    assert bad.steps[0].results == [] and bad.steps[1].results == []  # never dispatched
    assert bad.steps[2].results[0].error == "no_key"
    out = graded(bad).outcome
    assert out.tier == "failed" and out.fail_reason == "wrong_answer"


def test_module_verify_judges_the_end_state(tmp_path):
    module = KV_MODULE + '''

def verify(state, answer):
    return state["data"].get("x") == 4 and answer == 9
'''
    name = write_env(tmp_path, module=module)
    env = make_env(name)
    env.reset(kv_task(name, expected=None))
    env.execute(ToolCall(name="submit", arguments={"answer": 9}))
    assert env.done and not env.verify().correct  # x was never stored
    snap = env.snapshot()
    env.restore({**snap, "done": False})
    env.execute(ToolCall(name="put", arguments={"key": "x", "value": 4}))
    env.execute(ToolCall(name="submit", arguments={"answer": 9}))
    assert env.verify().correct
    env.restore(snap)  # the state dict is part of the snapshot
    assert "x" not in env.state["data"] and not env.verify().correct


def test_openai_function_format_is_read_the_same(tmp_path):
    openai = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                "parameters": t["inputSchema"]}}
              for t in KV_TOOLS]
    mcp_name = write_env(tmp_path, stem="a")
    openai_name = write_env(tmp_path, tools={"tools": openai}, stem="b")
    assert env_class(mcp_name).toolset().fingerprint == env_class(openai_name).toolset().fingerprint


@pytest.mark.parametrize("tools, module, message", [
    (KV_TOOLS, KV_MODULE.replace("def add(a, b)", "def plus(a, b)"),
     "tool 'add' has no implementation"),
    (KV_TOOLS, KV_MODULE.replace("def add(a, b)", "def add(a, c)"),
     "has no parameter for schema argument(s) ['b']"),
    (KV_TOOLS, KV_MODULE.replace("def add(a, b)", "def add(a, b, c=1)"),
     "parameter(s) ['c'] are not in the tool's schema"),
    ([{**KV_TOOLS[2], "inputSchema": {**KV_TOOLS[2]["inputSchema"], "required": ["a"]}},
      *KV_TOOLS[3:]], KV_MODULE, "have no default but the schema does not require them"),
    (KV_TOOLS, KV_MODULE.replace('final_tool = "submit"', 'final_tool = "done"'),
     "final_tool 'done' is not one of the listed tools"),
    ([{"name": "verify", "inputSchema": {"type": "object"}}], KV_MODULE, "reserved"),
    ([{"name": "put", "description": "x"}], KV_MODULE, "no inputSchema (MCP) or parameters"),
    ([{"name": "put", "inputSchema": {"type": "object", "properties": {"key": {"type": 5}}}}],
     KV_MODULE, "invalid JSON Schema"),
    ([KV_TOOLS[1], KV_TOOLS[1]], KV_MODULE, "listed twice: ['get']"),
    ([], KV_MODULE, "non-empty list of tools"),
])
def test_mismatches_are_value_errors_naming_the_tool(tmp_path, tools, module, message):
    name = write_env(tmp_path, tools=tools, module=module)
    with pytest.raises(ValueError) as err:
        env_class(name)
    assert message in str(err.value)


def test_missing_files_are_named(tmp_path):
    (tmp_path / "only.json").write_text(json.dumps(KV_TOOLS))
    with pytest.raises(ValueError, match="only.py: no such implementation module"):
        env_class(f"mcp:{tmp_path / 'only.json'}")
    with pytest.raises(ValueError, match="no such tool list"):
        mcp_env_class(tmp_path / "absent.json", tmp_path / "only.json")
    (tmp_path / "broken.json").write_text("[{")
    with pytest.raises(ValueError, match="broken.json: cannot read the tool list"):
        read_tool_list(tmp_path / "broken.json")


@pytest.mark.parametrize("name,data,message", [
    ("latin1.json", b"\xff\xfe[]", "cannot read the tool list: 'utf-8' codec"),
    ("deep.json", b"[" * 100_000, "cannot read the tool list: maximum recursion depth"),
    ("fn.json", b'[{"type": "function", "function": "run"}]', "tools[0]: 'function' must be an object, got str"),
])
def test_a_tool_list_it_cannot_read_is_named_not_a_traceback(tmp_path, name, data, message):
    """Not UTF-8 was a ValueError naming no file; nesting too deep a RecursionError; an OpenAI
    entry whose ``function`` is not an object an AttributeError."""
    (tmp_path / name).write_bytes(data)
    with pytest.raises(ValueError) as err:
        read_tool_list(tmp_path / name)
    assert str(err.value).startswith(str(tmp_path / name)) and message in str(err.value)


def test_a_list_answer_json_cannot_read_is_a_wrong_answer_not_an_env_fault(tmp_path):
    text_answer = {**KV_TOOLS[3], "inputSchema": {"type": "object", "properties": {
        "answer": {"type": "string"}}, "required": ["answer"]}}
    name = write_env(tmp_path, tools=[*KV_TOOLS[:3], text_answer])
    task = kv_task(name, expected=["x", "y"])
    # Nested past the recursion limit, and an integer past the int-string limit: json.loads
    # raises RecursionError / ValueError, which escaped verify as the environment's fault.
    for answer in ("[" * 3000 + "]" * 3000, "[1" + "0" * 5000 + "]"):
        [t] = run_episodes([task], ScriptedPolicy([call("submit", answer=answer)]))
        assert t.end == "submitted" and t.verdict.submitted and not t.verdict.correct, t.faults
        assert graded(t).outcome.fail_reason == "wrong_answer"


def test_a_number_answer_past_float_range_is_a_wrong_answer_not_an_env_fault(tmp_path):
    name = write_env(tmp_path)
    # JSON carries 10**400 (under the int-string limit), but float() of it raised OverflowError.
    [t] = run_episodes([kv_task(name)], ScriptedPolicy([call("submit", answer=10 ** 400)]))
    assert t.end == "submitted" and t.verdict.submitted and not t.verdict.correct, t.faults
    assert graded(t).outcome.fail_reason == "wrong_answer"
