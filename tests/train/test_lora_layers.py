"""``--lora-layers N``: adapters on the top N decoder layers only, and nothing recorded below them."""

import json

import pytest
import torch

from trajforge.train.model import lora_model
from trajforge.train.plan import Hardware, Workload, train_flops_per_token, train_memory
from trajforge.train.sft import SFTConfig, train_sft
from trajforge.train.shapes import model_shape


def _layer_of(name: str) -> int:
    return int(name.split("layers.")[1].split(".")[0])


def test_only_the_top_layers_get_adapters_and_the_count_is_the_plans(tiny_model):
    cfg = SFTConfig(lora_layers=1, r=4, dropout=0.0)
    net, _ = lora_model(tiny_model, cfg)
    trainable = {n: p.numel() for n, p in net.named_parameters() if p.requires_grad}
    assert {_layer_of(n) for n in trainable} == {1}  # the tiny model has layers 0 and 1
    assert sum(trainable.values()) == model_shape(tiny_model).lora_params(4, cfg.targets, 1)
    assert sum(trainable.values()) * 2 == model_shape(tiny_model).lora_params(4, cfg.targets)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_autograd_records_nothing_below_the_lowest_adapted_layer(tiny_model, checkpointing):
    """What makes the option fast: layer 0's output needs no gradient, so the backward stops at
    layer 1 — with checkpointing too, where transformers hooks the embeddings to need one."""
    net, _ = lora_model(tiny_model, SFTConfig(lora_layers=1, r=4, dropout=0.0, gradient_checkpointing=checkpointing))
    outputs = {}
    for i, layer in enumerate(net.base_model.model.model.layers):
        layer.register_forward_hook(lambda m, a, out, i=i: outputs.__setitem__(i, out[0] if isinstance(out, tuple) else out))
    net.train()
    net(input_ids=torch.tensor([[5, 6, 7, 8]])).logits.sum().backward()
    assert not outputs[0].requires_grad and outputs[1].requires_grad


def test_checkpointing_is_turned_on_by_the_name_this_transformers_keeps(tiny_model):
    """transformers 5.2x renamed it ``activation_checkpointing_enable``; the old name warns in every
    training log there and goes in v6."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*gradient_checkpointing_enable.*deprecated")
        net, _ = lora_model(tiny_model, SFTConfig(r=4, dropout=0.0, gradient_checkpointing=True))
    base = net.base_model.model
    on = base.is_activation_checkpointing if hasattr(type(base), "is_activation_checkpointing") \
        else base.is_gradient_checkpointing
    assert on


def test_more_layers_than_the_model_has_is_refused_by_name(tiny_model):
    with pytest.raises(ValueError, match="lora_layers=3, but the model has 2 decoder layers"):
        lora_model(tiny_model, SFTConfig(lora_layers=3))
    with pytest.raises(ValueError, match="lora_layers must be 0"):
        SFTConfig(lora_layers=-1)


def test_a_top_layer_adapter_trains_saves_and_loads(tiny_model, expert_trajs, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    cfg = SFTConfig(lora_layers=1, r=4, dropout=0.0, max_steps=2, batch_size=2, grad_accum=1, replay_share=0.0)
    res = train_sft(expert_trajs[:4], tiny_model, tmp_path / "a", cfg, progress=False)
    assert res.steps == 2
    saved = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    assert saved["layers_to_transform"] == [1]
    net = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), str(tmp_path / "a"))
    assert {_layer_of(n) for n, _ in net.named_parameters() if "lora_" in n} == {1}


def test_the_plan_counts_adapters_activations_and_flops_for_the_adapted_layers_only():
    shape = model_shape("qwen2.5-7b")  # 28 layers
    hw, work = Hardware(device="cuda"), Workload(rows=2, width=2048, loss_tokens=512)
    every, top7 = (SFTConfig(dtype="bfloat16", gradient_checkpointing=False, lora_layers=n) for n in (0, 7))
    a, b = train_memory(shape, every, hw, work), train_memory(shape, top7, hw, work)
    assert b.lora_params * 4 == a.lora_params and b.weights_gb == a.weights_gb
    assert b.activations_gb < 0.3 * a.activations_gb  # a quarter of the layers keep activations
    # The forward runs through every layer, the backward through a quarter of them: 2F → 1.25F.
    fa, fb = (train_flops_per_token(shape, c, 2048, 0.0) for c in (every, top7))
    assert fb / fa == pytest.approx(1.25 / 2, rel=0.01)
    with pytest.raises(ValueError, match="29, but qwen2.5-7b has 28"):
        train_memory(shape, SFTConfig(lora_layers=29), hw, work)
