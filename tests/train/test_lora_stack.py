"""Stacking a LoRA lineage into one adapter is exact: same logits as merging them in order."""

import json

import pytest
import torch

from trajforge.train.lora_stack import read_lora, stack_loras


def _adapter(base, out, seed, **lora):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    net = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    get_peft_model(net, LoraConfig(init_lora_weights=False, **lora)).save_pretrained(out)
    return str(out)


def _logits(net, ids):
    with torch.no_grad():
        return net(input_ids=torch.tensor([ids])).logits[0]


def test_stacked_adapter_equals_the_merged_lineage(tiny_model, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    # Different ranks, alphas, rsLoRA scaling and target sets: every case the formula must cover.
    first = _adapter(tiny_model, tmp_path / "sft", 1, r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    second = _adapter(tiny_model, tmp_path / "dpo", 2, r=2, lora_alpha=8, use_rslora=True,
                      target_modules=["q_proj", "o_proj", "down_proj"])
    third = _adapter(tiny_model, tmp_path / "grpo", 3, r=3, lora_alpha=3, target_modules=["v_proj"])
    ids = list(range(5, 40))
    merged = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    for step in (first, second, third):
        merged = PeftModel.from_pretrained(merged, step).merge_and_unload()
    want = _logits(merged.eval(), ids)

    stacked = stack_loras([first, second, third], tmp_path / "stacked")
    cfg = json.loads((stacked / "adapter_config.json").read_text())
    assert cfg["r"] == cfg["lora_alpha"] == 9 and not cfg["use_rslora"]
    assert sorted(cfg["target_modules"]) == ["down_proj", "o_proj", "q_proj", "v_proj"]
    base = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    got = _logits(PeftModel.from_pretrained(base, stacked).eval(), ids)
    plain = _logits(AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval(), ids)
    assert (want - plain).abs().max() > 1e-2  # the adapters matter
    assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()
    tensors, scale, _ = read_lora(stacked)
    assert scale == 1.0 and all(a.shape[0] == 9 and b.shape[1] == 9 for a, b in tensors.values())


@pytest.mark.parametrize("field,value", [("use_dora", True), ("rank_pattern", {"q_proj": 8}),
                                         ("modules_to_save", ["lm_head"])])
def test_adapters_that_are_not_plain_low_rank_deltas_are_refused(tiny_model, tmp_path, field, value):
    folder = _adapter(tiny_model, tmp_path / "a", 1, r=2, lora_alpha=4, target_modules=["q_proj"])
    cfg_path = tmp_path / "a" / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg[field] = value
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=field):
        stack_loras([folder], tmp_path / "out")


def test_adapters_on_the_top_layers_only_stack_exactly(tiny_model, tmp_path):
    """``--lora-layers``: an adapter on the top layer under one on every layer, and two top-layer
    adapters, stack into the merged lineage's logits, adapting the union of their layers."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    top = _adapter(tiny_model, tmp_path / "top", 1, r=2, lora_alpha=4, target_modules=["q_proj"],
                   layers_to_transform=[1])
    top_too = _adapter(tiny_model, tmp_path / "top2", 2, r=2, lora_alpha=4, target_modules=["v_proj"],
                       layers_to_transform=[1])
    every = _adapter(tiny_model, tmp_path / "all", 3, r=2, lora_alpha=4, target_modules=["q_proj"])
    ids = list(range(5, 40))
    for lineage, layers in (([top, every], None), ([top, top_too], [1])):
        merged = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
        for step in lineage:
            merged = PeftModel.from_pretrained(merged, step).merge_and_unload()
        stacked = stack_loras(lineage, tmp_path / f"stacked{len(str(layers))}")
        assert json.loads((stacked / "adapter_config.json").read_text())["layers_to_transform"] == layers
        base = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
        got = _logits(PeftModel.from_pretrained(base, stacked).eval(), ids)
        want = _logits(merged.eval(), ids)
        assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()
