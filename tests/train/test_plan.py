"""`trajforge plan`: parameter counts, the issue-12 17B budget, sharding, 4/8-bit, KV cache, --data, JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.cli.options import check_defaults, field_default
from trajforge.train.plan import (BYTES, GB, LORA_BYTES, NF4_BYTES, PLANNED_SETTINGS, Hardware, Workload,
                                  layer_bytes_per_token, make_plan, serve_memory, train_memory)
from trajforge.train.sft import SFTConfig
from trajforge.train.shapes import KNOWN, model_shape, shape_from_config

# Totals the model cards publish (the safetensors parameter count on each hub page).
PUBLISHED = {
    "qwen2.5-0.5b": 494_032_768, "qwen2.5-1.5b": 1_543_714_304, "qwen2.5-3b": 3_085_938_688,
    "qwen2.5-7b": 7_615_616_512, "qwen2.5-14b": 14_770_033_664, "qwen2.5-32b": 32_763_876_352,
    "llama-3.1-8b": 8_030_261_248, "llama-3.2-1b": 1_235_814_400, "llama-3.2-3b": 3_212_749_824,
    "mistral-7b": 7_248_023_552, "gemma-2-9b": 9_241_705_984, "phi-3-mini": 3_821_079_552,
    "smollm2-135m": 134_515_008,
}


@pytest.fixture(autouse=True)
def _device_dtypes(monkeypatch):
    """Plans use each device's own dtype (bf16 on CUDA): nothing here trains, so the fp32 pin of
    the training tests (conftest) is lifted."""
    monkeypatch.delenv("TRAJFORGE_DTYPE", raising=False)


def _plan(*args: str) -> dict:
    res = CliRunner().invoke(app, ["plan", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_equal_the_published_totals(name):
    assert KNOWN[name] and model_shape(name).params().total == PUBLISHED[name]


def test_rounded_totals_as_the_issue_quotes_them():
    assert f"{model_shape('Qwen/Qwen2.5-7B-Instruct').params().total / 1e9:.2f}B" == "7.62B"
    assert f"{model_shape('meta-llama/Llama-3.1-8B').params().total / 1e9:.2f}B" == "8.03B"
    assert round(model_shape("17b").params().total / 1e9, 1) == 17.0


@pytest.mark.parametrize("kind,extra", [
    ("llama", {"tie_word_embeddings": False}),
    ("qwen2", {"tie_word_embeddings": True}),  # q/k/v biases
    ("gemma2", {"head_dim": 16, "tie_word_embeddings": True}),  # four norms per layer
    ("phi3", {"tie_word_embeddings": False, "pad_token_id": 0}),  # fused qkv_proj and gate_up_proj
    ("qwen3", {"head_dim": 32, "tie_word_embeddings": False}),  # q_norm, k_norm of head_dim
    ("gemma3_text", {"head_dim": 16}),  # four norms per layer and q_norm, k_norm
    ("olmo2", {"tie_word_embeddings": False, "pad_token_id": 0}),  # q_norm, k_norm over whole q and k
])
def test_counts_equal_transformers_own_for_a_local_config(tmp_path, kind, extra):
    """A folder's config.json → the same count as the model transformers builds from it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(kind, vocab_size=320, hidden_size=64, intermediate_size=112, num_hidden_layers=3,
                               num_attention_heads=4, num_key_value_heads=2, **extra)
    cfg.save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_config(cfg)
    assert model_shape(str(tmp_path)).params().total == sum(p.numel() for p in model.parameters())


def test_lora_count_equals_peft_and_names_missing_targets(tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model("phi3", vocab_size=320, hidden_size=64, intermediate_size=112, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=4, pad_token_id=0)
    cfg.save_pretrained(tmp_path)
    targets = ["qkv_proj", "o_proj", "down_proj", "gate_up_proj"]
    net = get_peft_model(AutoModelForCausalLM.from_config(cfg), LoraConfig(r=8, target_modules=targets))
    trainable = sum(p.numel() for p in net.parameters() if p.requires_grad)
    assert model_shape(str(tmp_path)).lora_params(8, targets) == trainable
    plan = make_plan(model_shape(str(tmp_path)), SFTConfig(), Hardware())  # the default llama targets
    assert plan.train.unmatched_targets == ["q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"]
    assert any("phi3 has no q_proj" in n for n in plan.notes)


def test_the_17b_example_of_issue_12():
    """17B in BF16 = 34 GB of weights, 4-8 GB of KV cache, 2-4 GB of buffers."""
    plan = _plan("--model", "dense-17b", "--device", "cuda", "--dtype", "bfloat16")
    assert plan["params"] == 17_034_957_824
    assert plan["train"]["weights_gb"] == plan["serve"]["weights_gb"] == pytest.approx(34.07, abs=0.01)
    assert 4 <= plan["serve"]["kv_cache_gb"] <= 8  # 4096 tokens × 8 sequences: 6.44 GB
    assert 2 <= plan["serve"]["buffers_gb"] <= 4
    assert plan["serve"]["tensor_parallel_size"] == 1 and plan["serve"]["fits"]
    small = _plan("--model", "dense-17b", "--device", "cuda", "--gpu-gb", "24")
    # On 24 GB cards: two share the weights (17 GB each) + KV (3.2) + buffers; training does not fit one.
    assert small["serve"]["tensor_parallel_size"] == 2 and small["serve"]["per_gpu_gb"] <= 0.95 * 24
    assert not small["train"]["fits"]


def test_json_contract_only_json_on_stdout_and_no_torch():
    code = ("import sys, json\n"
            "from trajforge.cli.main import main\n"
            "sys.argv = ['trajforge', 'plan', '--model', 'qwen2.5-7b', '--device', 'cuda', '--json']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules, 'plan imported torch'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    plan = json.loads(out)  # the whole of stdout is one JSON document
    for section, keys in {"train": ("weights_gb", "total_gb"), "serve": ("weights_gb", "kv_cache_gb")}.items():
        assert all(isinstance(plan[section][k], float) for k in keys)
    t = plan["train"]
    parts = t["weights_gb"] + t["lora_gb"] + t["activations_gb"] + t["logits_gb"] + t["runtime_gb"]
    assert t["total_gb"] == pytest.approx(parts, abs=0.005)
    assert t["weights_gb"] == pytest.approx(7_615_616_512 * 2 / GB, abs=0.001)


def test_defaults_are_train_sfts():
    """The settings options are SFTConfig's fields with SFTConfig's defaults; a drift fails here."""
    from trajforge.cli.plan_cmd import plan as plan_command

    assert check_defaults(plan_command) == []
    planned = _plan("--model", "qwen2.5-0.5b", "--device", "cuda", "--gpu-gb", "24")
    settings = planned["settings"]
    # batch_size, grad_accum, epochs and checkpointing are derived (train/defaults.py): 1000 samples
    # → one pass at batch 8; 2 × 4096 tokens without checkpointing plan to 19.0 GB, within 80% of
    # 24 GB (4 × 4096 do not), so micro-batches of 2, four of them a step.
    assert settings == {k: field_default(SFTConfig, k) for k in PLANNED_SETTINGS} | {
        "batch_size": 2, "grad_accum": 4, "epochs": 1, "gradient_checkpointing": False}
    assert any(note.startswith("derived: micro-batch 2: the largest power of two ≤ 8 whose planned peak without "
                               "checkpointing (19.0 GB)") for note in planned["notes"])
    assert any(note.startswith("derived: effective batch 8") for note in planned["notes"])
    assert any(note.startswith("derived: gradient checkpointing off: the plan's peak without it is 19.0 GB")
               for note in planned["notes"])
    small = _plan("--model", "qwen2.5-0.5b", "--device", "cuda", "--gpu-gb", "12")
    assert small["settings"]["gradient_checkpointing"] is True
    assert small["train"]["total_gb"] < planned["train"]["total_gb"]  # the plan is for what will run
    changed = _plan("--model", "qwen2.5-0.5b", "--lora-r", "8", "--batch", "3", "--grad-accum", "2",
                    "--max-len", "1024", "--no-gradient-checkpointing")["settings"]
    assert (changed["r"], changed["batch_size"], changed["grad_accum"], changed["max_len"],
            changed["gradient_checkpointing"]) == (8, 3, 2, 1024, False)


def _memory(name="qwen2.5-7b", gpus=1, **settings):
    cfg = SFTConfig(dtype="bfloat16", **settings)
    return train_memory(model_shape(name), cfg, Hardware(device="cuda", gpus=gpus),
                        Workload(rows=2, width=2048, loss_tokens=512))


def test_sharding_arithmetic_for_ddp_zero2_zero3_fsdp():
    one = _memory()
    n_lora, weights = one.lora_params, 7_615_616_512 * 2
    assert one.lora_gb == pytest.approx(n_lora * LORA_BYTES / GB, abs=1e-3)
    ddp, zero2, zero3, fsdp = (_memory(gpus=4, distributed=m) for m in ("ddp", "zero2", "zero3", "fsdp"))
    assert ddp.weights_gb == zero2.weights_gb == one.weights_gb  # replicated
    assert ddp.lora_gb == pytest.approx(n_lora * (LORA_BYTES + 4) / GB, abs=1e-3)  # + gradient buckets
    assert zero2.lora_gb == pytest.approx(n_lora * (4 + 12 / 4) / GB, abs=1e-3)  # grads + moments sharded
    layer = weights / 28
    for sharded in (zero3, fsdp):
        assert sharded.weights_gb == pytest.approx((weights / 4 + 2 * layer) / GB, abs=1e-3)
        assert sharded.lora_gb == pytest.approx(n_lora * LORA_BYTES / 4 / GB, abs=1e-3)
    # Activations belong to each process's own micro-batch: no mode shards them.
    assert {m.activations_gb for m in (one, ddp, zero2, zero3, fsdp)} == {one.activations_gb}


def test_four_and_eight_bit_weights():
    count = model_shape("qwen2.5-7b").params()
    rest = count.total - count.linear  # embeddings, LM head, norms: fp32 after prepare_model_for_kbit_training
    four, eight = _memory(load_in="4bit"), _memory(load_in="8bit")
    assert four.weights_gb == pytest.approx((count.linear * NF4_BYTES + rest * 4) / GB, abs=1e-3)
    assert eight.weights_gb == pytest.approx((count.linear + rest * 4) / GB, abs=1e-3)
    assert four.weights_gb < eight.weights_gb < _memory().weights_gb
    assert four.activations_gb > _memory().activations_gb  # fp32 activations, no autocast
    plan = _plan("--model", "qwen2.5-7b", "--device", "cuda", "--load-in-4bit")
    assert plan["settings"]["load_in"] == "4bit" and plan["train"]["weights_gb"] == four.weights_gb
    assert any("arithmetic only" in n for n in plan["notes"])


def test_checkpointing_keeps_one_layer():
    on, off = _memory(gradient_checkpointing=True), _memory(gradient_checkpointing=False, share_prefix=False)
    shape = model_shape("qwen2.5-7b")
    per_layer = layer_bytes_per_token(shape, BYTES["bfloat16"], 32, SFTConfig().targets, 0.05, "cuda") * 2 * 2048
    assert off.activations_gb - on.activations_gb == pytest.approx(
        (27 * per_layer - 28 * 2 * 2048 * shape.hidden * 2) / GB, rel=0.02)


def test_serve_kv_cache_arithmetic():
    shape = model_shape("qwen2.5-7b")
    assert shape.kv_bytes_per_token(2) == 2 * 28 * 4 * 128 * 2  # 57,344 bytes
    serve = serve_memory(shape, "bfloat16", 32768, 2, 80.0)
    assert serve.kv_cache_gb == pytest.approx(57_344 * 32768 * 2 / GB, abs=1e-3)
    assert serve.weights_gb == pytest.approx(7_615_616_512 * 2 / GB, abs=1e-3)
    assert serve.total_gb == pytest.approx(serve.weights_gb + serve.kv_cache_gb + serve.buffers_gb, abs=2e-3)
    # The utilization covers exactly that share of one GPU (plus 2 points), and 32B needs several 24 GB cards.
    assert serve.gpu_memory_utilization == pytest.approx(serve.per_gpu_gb / 80 + 0.02, abs=0.011)
    big = serve_memory(model_shape("qwen2.5-32b"), "bfloat16", 4096, 8, 24.0)
    assert big.tensor_parallel_size == 4 and big.per_gpu_gb <= 0.95 * 24
    # Qwen2.5-7B has 28 heads: tensor parallelism 8 does not divide them and is never proposed.
    assert serve_memory(shape, "bfloat16", 131072, 16, 24.0).tensor_parallel_size in (1, 2, 4)


def test_time_and_cost():
    plan = _plan("--model", "qwen2.5-7b", "--device", "cuda", "--gpus", "2", "--samples", "500",
                 "--tokens-per-s", "4000", "--price-per-hour", "3", "--epochs", "2")
    t = plan["time"]
    assert t["tokens"] == 500 * 4096 * 2 and t["tokens_per_s_source"] == "given"
    assert t["hours"] == pytest.approx(500 * 4096 * 2 / 4000 / 3600, abs=1e-4)
    assert t["gpu_hours"] == pytest.approx(2 * t["hours"], abs=1e-4) and t["cost"] == pytest.approx(3 * t["gpu_hours"], abs=0.01)


@pytest.mark.parametrize("flag,value", [("--gpu-gb", "nan"), ("--gpu-gb", "inf"), ("--tokens-per-s", "inf"),
                                        ("--tokens-per-s", "nan"), ("--price-per-hour", "inf")])
def test_hardware_numbers_must_be_finite(flag, value):
    """--gpu-gb nan was "cannot convert float NaN to integer"; --gpu-gb inf said any model fits,
    --tokens-per-s inf planned 0.00 h, --price-per-hour inf a cost of inf: all exit 0."""
    res = CliRunner().invoke(app, ["plan", "--device", "cuda", flag, value])
    assert res.exit_code == 2 and f"error: {flag} must be" in res.output and "finite" in res.output, res.output


def test_unknown_model_is_a_clear_error():
    res = CliRunner().invoke(app, ["plan", "--model", "org/nothing-like-it", "--json"])
    assert res.exit_code == 2 and "not a known model" in res.output and "qwen2.5-7b" in res.output


def test_data_reads_the_stores_sequences(tmp_path, tiny_model, expert_trajs):
    """--data: the samples the real sequence builder makes with the model's tokenizer."""
    from transformers import AutoTokenizer

    from trajforge.store import TrajectoryStore
    from trajforge.train.sft import build_samples, select

    store = TrajectoryStore(tmp_path / "store")
    for t in expert_trajs:
        store.append(t)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    samples, _ = build_samples(select(expert_trajs, SFTConfig())[0], tok, tiny_model, SFTConfig(), {})
    lengths = [len(s.input_ids) for s in samples]
    plan = _plan("--model", tiny_model, "--data", str(tmp_path / "store"), "--device", "cpu", "--batch", "3",
                 "--gradient-checkpointing")  # checkpointed, the widest micro-batch peaks highest
    assert plan["data"]["samples"] == len(samples) and plan["data"]["longest"] == max(lengths)
    assert plan["data"]["tokens"] == sum(lengths) and plan["data"]["tokenizer"] == tiny_model
    w = plan["workload"]
    assert w["source"] == "data" and w["rows"] <= 3 and w["width"] == -(-max(lengths) // 8) * 8
    assert w["prefix"] > 0  # every SQL sample starts with the same system prompt and tools
    cut = _plan("--model", tiny_model, "--data", str(tmp_path / "store"), "--max-len", str(sorted(lengths)[len(lengths) // 2]))
    assert cut["data"]["skipped"]["too_long"] > 0 and cut["data"]["longest"] < max(lengths)
    # A short run (max_steps) meets only its first micro-batches: the plan is for those.
    from trajforge.train.plan_data import micro_batch
    from trajforge.train.sft import epoch_rows

    first = epoch_rows(samples, 1.0, 2, SFTConfig().seed)[0]
    short = _plan("--model", tiny_model, "--data", str(tmp_path / "store"), "--device", "cpu", "--batch", "2",
                  "--grad-accum", "1", "--max-steps", "1", "--replay-share", "0")["workload"]
    assert (short["rows"], short["width"], short["loss_tokens"], short["prefix"]) == micro_batch(
        [samples[i] for i in first])


def test_shape_reader_rejects_a_non_language_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "vit", "hidden_size": 8}))
    with pytest.raises(ValueError, match="decoder-only"):
        model_shape(str(tmp_path))
    assert shape_from_config({"text_config": KNOWN["qwen2.5-0.5b"]}, "mm", "x").hidden == 896


def test_a_mixture_of_experts_config_is_refused_not_counted_as_dense(tmp_path):
    """Mixtral counted as dense came out at a quarter of transformers' own count (one expert's MLP
    of 8), Qwen2-MoE at 1/360: plan said such a model fits where it does not."""
    from transformers import AutoConfig

    AutoConfig.for_model("mixtral", vocab_size=320, hidden_size=64, intermediate_size=112, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"config.json: a mixture-of-experts model \(num_local_experts = 8\)"):
        model_shape(str(tmp_path))


@pytest.mark.parametrize("config,names", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object, got list"),
    ('{"hidden_size": 64, "num_attention_heads": 0, "vocab_size": 320, "num_hidden_layers": 2, '
     '"intermediate_size": 112}', "'num_attention_heads' must be a positive integer, got 0"),
    ('{"hidden_size": 64, "num_attention_heads": 4, "vocab_size": null, "num_hidden_layers": 2, '
     '"intermediate_size": 112}', "config has no 'vocab_size'"),
    ('{"hidden_size": "abc", "num_attention_heads": 4, "vocab_size": 320, "num_hidden_layers": 2, '
     '"intermediate_size": 112}', "'hidden_size' must be a positive integer, got 'abc'"),
])
def test_a_broken_config_json_is_an_error_naming_the_file_and_field(tmp_path, config, names):
    """Each was a traceback (AttributeError, ZeroDivisionError, TypeError) or a bare message
    ("invalid literal for int()") that named neither the file nor the field."""
    (tmp_path / "config.json").write_text(config)
    res = CliRunner().invoke(app, ["plan", "--model", str(tmp_path), "--device", "cpu"])
    assert res.exit_code == 2, res.output
    assert str(tmp_path / "config.json") in res.output and names in res.output


def test_cpu_time_is_estimated_at_the_dtypes_measured_rate():
    """bf16 under AMX sustains ~4× fp32's FLOP/s on this CPU; one constant for both was 4× off."""
    from trajforge.train.plan import CPU_TRAIN_FLOPS

    bf16, fp32 = (_plan("--model", "smollm2-135m", "--device", "cpu", "--dtype", d, "--gradient-checkpointing")["time"]
                  for d in ("bfloat16", "float32"))
    assert bf16["flops_per_token"] == fp32["flops_per_token"]
    assert bf16["tokens_per_s"] / fp32["tokens_per_s"] == pytest.approx(
        CPU_TRAIN_FLOPS["bfloat16"] / CPU_TRAIN_FLOPS["float32"], rel=0.01)
    assert "bfloat16" in bf16["tokens_per_s_source"] and "float32" in fp32["tokens_per_s_source"]
