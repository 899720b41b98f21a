"""Bring your own model: the whole loop on tiny random llama, qwen2, gemma2 and phi3 models, each with
its family's real chat template and special tokens (tests/policies/families.py), in both render
modes — synth → collect (hf policy) → train sft → eval → serve (loopback, one request) — and the
renderings a template that cannot take a system message, tools or tool results gets.

Assertions per architecture and mode: the hf policy's stored token ids verify against the SFT
renderer (training uses them, not a re-rendering), every LoRA weight changed, eval ran the adapter
in the dialect, render mode and template it was trained with, and ``serve`` renders the same request
to the same prompt ids as the eval policy.
"""

from __future__ import annotations

import json
import threading

import pytest
from typer.testing import CliRunner

from tests.policies.families import FAMILIES, build_family_model, template_text
from trajforge.cli.main import app
from trajforge.envs import env_class
from trajforge.parse import Dialect
from trajforge.parse.detect import template_traits
from trajforge.policies.base import TurnRequest
from trajforge.policies.hf import ADAPTER_META, HFPolicy
from trajforge.policies.loading import DEFAULT_CHAT_TEMPLATE, load_tokenizer
from trajforge.schema import Message, ToolCall
from trajforge.store import TrajectoryStore
from trajforge.tasks.pool import read_tasks, write_tasks

TOOLSET = env_class("sql").toolset()
runner = CliRunner()


@pytest.fixture(autouse=True)
def _fp32(monkeypatch):
    monkeypatch.setenv("TRAJFORGE_DTYPE", "float32")  # as tests/train: no bf16 on AMX CPUs


def cli(*args) -> str:
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output + repr(res.exception)
    return res.output


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("families")


@pytest.fixture(scope="module")
def models(root):
    return {family: build_family_model(family, root / family) for family in FAMILIES}


@pytest.fixture(scope="module")
def pool(root):
    """Two train and two test tasks, through ``trajforge synth``."""
    full = root / "all.jsonl"
    cli("synth", "--env", "sql", "--n", 20, "--out", full, "--seed", 3)
    tasks = read_tasks(full)
    keep = [t for t in tasks if t.split == "train"][:2] + [t for t in tasks if t.split == "test"][:2]
    return write_tasks(root / "tasks.jsonl", keep)


def serve_once(model, adapters: dict, body: dict, chat_template: str | None = None) -> dict:
    """One chat completion from ``trajforge serve``'s server (build_server, loopback, port 0)."""
    import urllib.request

    from trajforge.serve.http import build_server

    server = build_server(str(model), {k: str(v) for k, v in adapters.items()}, port=0, dtype="float32",
                          chat_template=chat_template)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        req = urllib.request.Request(f"{server.url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())
    finally:
        server.close()


def request_body(model_name: str) -> dict:
    return {"model": model_name, "max_tokens": 4, "temperature": 0, "return_token_ids": True,
            "messages": [{"role": "system", "content": "Answer with one SQL query."},
                         {"role": "user", "content": "How many customers live in Lyon?"}],
            "tools": TOOLSET.openai()}


@pytest.mark.parametrize("mode", ["dialect", "template"])
@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.slow
def test_the_loop_runs_on_each_architecture(family, mode, models, pool, root):
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from safetensors.torch import load_file
    import torch
    from transformers import AutoModelForCausalLM

    model, d = models[family], root / f"{family}-{mode}"
    spec = f"hf:{model}?render={mode}&max_tokens=24"  # a random model never stops: bound its turns
    cli("collect", "--tasks", pool, "--policy", spec, "--out", d / "store", "--split", "train", "--max-turns", 2)
    cli("collect", "--tasks", pool, "--policy", "expert", "--out", d / "store", "--split", "train")
    cli("grade", d / "store")
    # 3 steps: LoRA B starts at zero, so A only moves once a step has made B non-zero.
    cli("train", "sft", "--data", d / "store", "--model", model, "--out", d / "adapter", "--max-steps", 3,
        "--batch-size", 2, "--grad-accum", 1, "--replay-share", 0, "--render-mode", mode, "--tiers", "success", "--tiers", "failed")
    meta = json.loads((d / "adapter" / ADAPTER_META).read_text())
    tok = load_tokenizer(str(model))
    # The hf policy's own rollouts were trained from their stored ids: they verified against the renderer.
    assert meta["result"]["built"].get("stored_ids", 0) == 2, meta["result"]["built"]
    assert meta["result"]["steps"] == 3 and meta["render_mode"] == mode
    assert meta["chat_template"]["text"] == template_text(family)
    assert meta["dialect"] == Dialect.for_model(str(model), tok.chat_template).name

    torch.manual_seed(meta["config"]["seed"])
    cfg = meta["config"]
    init = get_peft_model_state_dict(get_peft_model(AutoModelForCausalLM.from_pretrained(model), LoraConfig(
        r=cfg["r"], lora_alpha=cfg["alpha"] or 2 * cfg["r"], lora_dropout=cfg["dropout"], target_modules=cfg["targets"],
        task_type="CAUSAL_LM")))
    trained = load_file(str(d / "adapter" / "adapter_model.safetensors"))
    assert trained.keys() == init.keys() and [k for k in trained if torch.equal(trained[k], init[k])] == []

    cli("eval", "--tasks", pool, "--policy", f"hf:{model}@{d / 'adapter'}?max_tokens=24", "--name", "tuned", "--split", "test",
        "--max-turns", 2, "--json", d / "eval.json")
    assert json.loads((d / "eval.json").read_text())["tuned"]["n"] == 2

    policy = HFPolicy(str(model), adapter=str(d / "adapter"), dtype="float32")
    assert policy.render_mode == mode and policy.dialect.name == meta["dialect"]
    answer = serve_once(model, {"tuned": d / "adapter"}, request_body("tuned"))
    body = request_body("tuned")
    messages = [Message(role=m["role"], content=m["content"]) for m in body["messages"]]
    task = read_tasks(pool)[0]
    assert answer["prompt_token_ids"] == policy.prompt_ids(TurnRequest(task, messages, TOOLSET, 0))
    assert answer["usage"]["completion_tokens"] <= 4


CONVERSATION = [
    Message(role="system", content="SYSTEM-TEXT: be brief."),
    Message(role="user", content="USER-TEXT: how many customers?"),
    Message(role="assistant", content="", tool_calls=[ToolCall(name="run_sql", arguments={"query": "SELECT 1"})]),
    Message(role="tool", content="TOOL-RESULT-TEXT: 42", name="run_sql", tool_call_id="call_0"),
]


@pytest.mark.parametrize("mode", ["dialect", "template"])
@pytest.mark.parametrize("family", ["gemma2", "phi3"])
def test_templates_without_a_system_role_tools_or_tool_role_lose_nothing(family, mode, models):
    tok = load_tokenizer(str(models[family]))
    traits = template_traits(tok)
    assert not traits.tools and not traits.tool_role and traits.system == (family == "phi3")
    dialect = Dialect.for_model(str(models[family]), tok.chat_template)
    text = dialect.chat_text(tok, CONVERSATION, TOOLSET, mode)  # gemma's template raises on a system turn
    for piece in ("SYSTEM-TEXT: be brief.", "USER-TEXT: how many customers?", "TOOL-RESULT-TEXT: 42",
                  '"name": "run_sql"', '"name": "describe_table"'):  # the call, and the tool schemas
        assert piece in text, (piece, text)
    if family == "gemma2":  # system text (and the tool block) open the first user turn
        assert text.startswith("<bos><start_of_turn>user\nSYSTEM-TEXT: be brief.")
        assert text.count("<start_of_turn>user") == 2 and text.endswith("<start_of_turn>model\n")


def test_template_mode_on_templates_that_take_tools_lets_them_render_the_tools(models):
    rendered = {}
    for family in ("llama", "qwen2"):
        tok = load_tokenizer(str(models[family]))
        assert template_traits(tok) == (True, True, True)
        dialect = Dialect.for_model(str(models[family]), tok.chat_template)
        rendered[family] = [dialect.chat_text(tok, CONVERSATION, TOOLSET, m) for m in ("dialect", "template")]
        for text in rendered[family]:
            assert "TOOL-RESULT-TEXT: 42" in text and "SYSTEM-TEXT: be brief." in text
    own, theirs = rendered["llama"]
    # Llama's template JSON-dumps a tool result (a string is "iterable" in Jinja) into its ipython turn.
    assert own != theirs and '<|start_header_id|>ipython<|end_header_id|>\n\n"TOOL-RESULT-TEXT: 42"<|eot_id|>' in theirs
    own, theirs = rendered["qwen2"]
    assert own == theirs  # hermes is Qwen2.5's own format: its template writes the very same prompt


def test_eos_becomes_the_templates_end_of_turn_token(models):
    ends = {family: load_tokenizer(str(models[family])).eos_token for family in FAMILIES}
    assert ends == {"llama": "<|eot_id|>", "qwen2": "<|im_end|>", "gemma2": "<end_of_turn>", "phi3": "<|end|>"}


@pytest.fixture(scope="module")
def bare(models, root):
    """The gemma2 model with its chat template removed: a base checkpoint."""
    from transformers import AutoTokenizer

    folder = root / "bare"
    tok = AutoTokenizer.from_pretrained(models["gemma2"])
    tok.chat_template = None
    _copy_weights(models["gemma2"], folder)
    tok.save_pretrained(folder)
    assert not (folder / "chat_template.jinja").exists()
    return folder


def _copy_weights(src, dst):
    import shutil

    dst.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(src / name, dst / name)


def test_a_model_without_a_chat_template_gets_the_default_and_a_file_chooses_another(bare, pool, root):
    assert load_tokenizer(str(bare)).chat_template == DEFAULT_CHAT_TEMPLATE
    res = runner.invoke(app, ["eval", "--tasks", str(pool), "--policy", f"hf:{bare}?max_tokens=24", "--split", "test",
                              "--max-turns", 1])  # a random model never stops: bound its turn
    assert res.exit_code == 0, res.output  # no transformers ValueError
    chosen = root / "phi.jinja"
    chosen.write_text(template_text("phi3"))
    policy = HFPolicy(str(bare), chat_template=str(chosen), dtype="float32")
    assert policy.tokenizer.chat_template == template_text("phi3")
    from trajforge.policies import make_policy

    assert make_policy(f"hf:{bare}?chat_template={chosen}").tokenizer.chat_template == template_text("phi3")


@pytest.mark.slow
def test_the_template_trained_with_is_the_one_eval_and_serve_render_with(bare, pool, root):
    """Train with --chat-template FILE; eval's policy and serve, given no flag, render the first turn
    of a training trajectory to the very ids the SFT sample holds."""
    from trajforge.train.data import render_sample

    # Gemma-2's template on the bare Gemma model: its turn end, <end_of_turn>, is a token there.
    chosen = root / "gemma.jinja"
    chosen.write_text(template_text("gemma2"))
    d = root / "bare-run"
    cli("collect", "--tasks", pool, "--policy", "expert", "--out", d / "store", "--split", "train")
    cli("train", "sft", "--data", d / "store", "--model", bare, "--out", d / "adapter", "--max-steps", 1,
        "--batch-size", 2, "--replay-share", 0, "--render-mode", "template", "--chat-template", chosen)
    meta = json.loads((d / "adapter" / ADAPTER_META).read_text())
    assert meta["chat_template"]["text"] == template_text("gemma2") and not meta["chat_template"]["default"]

    policy = HFPolicy(str(bare), adapter=str(d / "adapter"), dtype="float32")  # no template flag
    assert policy.tokenizer.chat_template == template_text("gemma2")
    traj = TrajectoryStore(d / "store").read()[0]
    trained = load_tokenizer(str(d / "adapter"))  # the tokenizer SFT rendered with, saved with the adapter
    sample = render_sample(traj, trained, TOOLSET, policy.dialect, render_mode="template")
    first = sample.loss_mask.index(1)
    at = next(i for i, m in enumerate(traj.messages) if m.role == "assistant")
    prompt = policy.prompt_ids(TurnRequest(read_tasks(pool)[0], traj.messages[:at], TOOLSET, 0))
    assert sample.input_ids[:first] == prompt
    assert policy.tokenizer.decode(prompt).startswith("<bos><start_of_turn>user\n")  # Gemma's turns, not ChatML

    answer = serve_once(bare, {"tuned": d / "adapter"}, request_body("tuned"))
    messages = [Message(role=m["role"], content=m["content"]) for m in request_body("tuned")["messages"]]
    assert answer["prompt_token_ids"] == policy.prompt_ids(TurnRequest(read_tasks(pool)[0], messages, TOOLSET, 0))
    with pytest.raises(ValueError, match="another chat template"):
        other = root / "phi-other.jinja"
        other.write_text(template_text("phi3"))
        HFPolicy(str(bare), adapter=str(d / "adapter"), chat_template=str(other), dtype="float32")
