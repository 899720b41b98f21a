"""Rendering through the model's own chat template (``render_mode="template"``): the hf policy's
prompts and the SFT renderer's are the same tokens, and the hermes parser reads what the template
renders. The tokenizer is the tiny one from tests/tiny.py with a Qwen2.5-style template written here."""

import pytest

from tests.tiny import CHATML, build_tiny_model
from trajforge.envs import env_class
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.parse import get_dialect
from trajforge.policies.expert import ExpertPolicy
from trajforge.policies.hf import HFPolicy, load_model
from trajforge.schema import Message, ToolCall
from trajforge.tasks import synthesize
from trajforge.train.data import render_sample

# Qwen2.5's tool template, shortened, with its own header line so a test can tell whose tool block
# a prompt shows (the hermes dialect's block otherwise reads exactly like Qwen2.5's).
QWEN_TOOLS = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools (chat template)\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + tool_call.name + '\", \"arguments\": ' + (tool_call.arguments | tojson)"
    " + '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
TOOLSET = env_class("sql").toolset()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def model(tiny):
    net, tok = load_model(str(tiny), dtype="float32")
    tok.chat_template = QWEN_TOOLS
    return net, tok


def learned_runs(mask: list[int]) -> list[int]:
    """Start index of each run of loss-mask 1s (one per assistant turn)."""
    return [i for i, m in enumerate(mask) if m and (i == 0 or not mask[i - 1])]


def test_policy_prompts_are_the_sft_prompts_token_for_token(tiny, model):
    pol = HFPolicy(str(tiny), loaded=model, render_mode="template", max_new_tokens=8, batch_size=4)
    assert pol.dialect.name == "hermes"  # chosen from the template's <tool_call> markers
    tasks = synthesize("sql", 20, seed=0).tasks[:3]
    trajs = run_episodes(tasks, pol, HarnessConfig(max_turns=2, max_consecutive_errors=2))
    _, tok = model
    for t in trajs:
        sample = render_sample(t, tok, TOOLSET, pol.dialect, render_mode="template")
        starts = learned_runs(sample.loss_mask)
        assert len(starts) == len(t.steps) == 2
        for start, step in zip(starts, t.steps):  # every turn, not only the first
            assert sample.input_ids[:start] == step.prompt_ids
            assert sample.input_ids[start: start + len(step.completion_ids)] == step.completion_ids
        prompt = tok.decode(t.steps[0].prompt_ids)
        assert "# Tools (chat template)" in prompt and '"name": "run_sql"' in prompt
        assert "# Tools\n\n" not in prompt  # the dialect's own tool block is not there as well


def test_dialect_mode_and_template_mode_differ_only_in_who_renders_the_tools(tiny, model):
    _, tok = model
    msgs = [Message(role="system", content="Be precise."), Message(role="user", content="How many?")]
    hermes = get_dialect("hermes")
    own = hermes.chat_text(tok, msgs, TOOLSET, "dialect")
    theirs = hermes.chat_text(tok, msgs, TOOLSET, "template")
    assert "# Tools\n\n" in own and "# Tools (chat template)" not in own
    assert "# Tools (chat template)" in theirs and theirs.startswith("<|im_start|>system\nBe precise.")


def test_hermes_reads_what_the_template_renders(model):
    _, tok = model
    calls = [ToolCall(name="run_sql", arguments={"query": "SELECT COUNT(*) FROM orders"}),
             ToolCall(name="describe_table", arguments={"table": "orders"})]
    chat = [{"role": "user", "content": "How many?"},
            {"role": "assistant", "content": "Checking.",
             "tool_calls": [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]}]
    text = tok.apply_chat_template(chat, tools=TOOLSET.openai(), tokenize=False)
    turn = text.split("<|im_start|>assistant")[-1].split("<|im_end|>")[0]
    res = get_dialect("hermes").parse(turn, TOOLSET)
    assert res.calls == calls and res.strictly_valid and res.text == "Checking."


def test_sft_targets_in_template_mode_parse_back_to_the_reference_calls(model):
    _, tok = model
    task = synthesize("sql", 20, seed=0).tasks[0]
    traj = run_episodes([task], ExpertPolicy(), HarnessConfig())[0]
    sample = render_sample(traj, tok, TOOLSET, get_dialect("hermes"), render_mode="template")
    starts = learned_runs(sample.loss_mask) + [len(sample.input_ids)]
    hermes = get_dialect("hermes")
    for k, (a, b) in enumerate(zip(starts, starts[1:])):
        learned = [t for t, m in zip(sample.input_ids[a:b], sample.loss_mask[a:b]) if m]
        text = tok.decode(learned).removesuffix("<|im_end|>")
        assert hermes.parse(text, TOOLSET).calls == [task.reference[k]]


def test_template_mode_on_a_template_without_tools_renders_the_dialects_tool_block(tiny, model):
    _, tok = model
    plain = load_model(str(tiny), dtype="float32")[1]
    assert plain.chat_template == CHATML
    msgs = [Message(role="user", content="hi")]
    hermes = get_dialect("hermes")  # documented in Dialect.chat_text: never a crash, never a dropped tool list
    assert hermes.chat_text(plain, msgs, TOOLSET, "template") == hermes.chat_text(plain, msgs, TOOLSET, "dialect")
    with pytest.raises(ValueError, match="unknown render mode"):
        get_dialect("hermes").chat_text(tok, msgs, TOOLSET, "jinja")
    with pytest.raises(ValueError, match="unknown render mode"):
        HFPolicy(str(tiny), loaded=model, render_mode="jinja")
