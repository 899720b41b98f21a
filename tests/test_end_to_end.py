"""The closed loop through the CLI on a tiny random llama built in the test (no download):
synth → collect expert → grade → train sft (parameters must change) → eval base vs tuned."""

import json

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from tests.tiny import build_tiny_model
from trajforge.cli.main import app
from trajforge.policies.hf import ADAPTER_META, AdapterMismatch, HFPolicy
from trajforge.harness import run_episodes
from trajforge.tasks.pool import read_tasks

runner = CliRunner()


def cli(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output + repr(res.exception)
    return res.output


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("e2e")
    model = build_tiny_model(d / "tiny")
    cli("synth", "--env", "sql", "--n", 60, "--out", d / "tasks.jsonl", "--seed", 3)
    cli("collect", "--tasks", d / "tasks.jsonl", "--policy", "expert", "--out", d / "store", "--split", "train")
    cli("grade", d / "store")
    cli("train", "sft", "--data", d / "store", "--model", model, "--out", d / "adapter", "--max-steps", 3,
        "--batch-size", 4, "--replay-share", 0.3)
    return d, model


def test_sft_changed_every_trainable_parameter(run):
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    d, model = run
    trained = load_file(str(d / "adapter" / "adapter_model.safetensors"))
    meta = json.loads((d / "adapter" / ADAPTER_META).read_text())
    torch.manual_seed(meta["config"]["seed"])
    base = AutoModelForCausalLM.from_pretrained(model)
    cfg = meta["config"]
    init = get_peft_model_state_dict(get_peft_model(base, LoraConfig(
        r=cfg["r"], lora_alpha=cfg["alpha"], lora_dropout=cfg["dropout"], target_modules=cfg["targets"],
        task_type="CAUSAL_LM")))
    assert trained.keys() == init.keys() and len(trained) == 2 * 7 * 2  # A and B, 7 modules, 2 layers
    unchanged = [k for k in trained if torch.equal(trained[k], init[k])]
    assert unchanged == []
    assert meta["result"]["steps"] == 3 and meta["toolset_fingerprint"]
    # --replay-share mixes self-distilled general samples in (against forgetting; off by default).
    assert meta["config"]["replay_share"] == 0.3
    n_expert = len([1 for line in (d / "store").glob("shard-*.jsonl") for _ in line.read_text().splitlines()])
    assert meta["result"]["samples"] > n_expert


def test_eval_compares_base_and_tuned(run):
    d, model = run
    out = d / "eval.json"
    cli("eval", "--tasks", d / "tasks.jsonl", "--policy", f"hf:{model}", "--policy", f"hf:{model}@{d / 'adapter'}",
        "--name", "base", "--name", "tuned", "--split", "heldout", "--json", out, "--max-turns", 2)
    metrics = json.loads(out.read_text())
    n_heldout = sum(t.split == "heldout" for t in read_tasks(d / "tasks.jsonl"))
    assert set(metrics) == {"base", "tuned"}
    for m in metrics.values():
        assert m["n"] == n_heldout and 0 <= m["completion"] <= 1 and 0 <= m["validity"] <= 1
        assert m["avg_turns"] >= 1 and set(m["tiers"]) <= {"easy", "medium", "hard"}


def test_adapter_refuses_other_toolset(run):
    d, model = run
    meta_path = d / "adapter" / ADAPTER_META
    meta = json.loads(meta_path.read_text())
    meta["toolset_fingerprint"] = "0" * 16
    meta["toolset_fingerprints"] = ["0" * 16]
    bad = d / "bad_adapter"
    bad.mkdir()
    for f in (d / "adapter").iterdir():
        if f.is_file():
            (bad / f.name).write_bytes(f.read_bytes())
    (bad / ADAPTER_META).write_text(json.dumps(meta))
    pol = HFPolicy(str(model), adapter=str(bad))
    task = read_tasks(d / "tasks.jsonl")[0]
    with pytest.raises(AdapterMismatch, match="0000000000000000"):
        run_episodes([task], pol)


def test_bad_inputs_fail_clearly(run, tmp_path):
    d, _ = run
    res = runner.invoke(app, ["collect", "--tasks", str(d / "tasks.jsonl"), "--policy", "gpt", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "bad policy spec 'gpt'" in res.output
    res = runner.invoke(app, ["eval", "--tasks", str(d / "tasks.jsonl"), "--policy", "expert", "--split", "nope"])
    assert res.exit_code == 2 and "no tasks with split 'nope'" in res.output
    broken = tmp_path / "t.jsonl"
    broken.write_text('{"id": 1}\n')
    res = runner.invoke(app, ["collect", "--tasks", str(broken), "--policy", "expert", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "t.jsonl" in res.output and "1" in res.output
