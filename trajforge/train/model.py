"""The model a recipe trains: the frozen base on its device, a fresh trainable LoRA on top.

``init_adapter`` (an earlier recipe's output, e.g. SFT before DPO/GRPO) is merged into the base
first, so the new adapter trains on top of it and "adapter disabled" means that model: the natural
reference for DPO's ratios and GRPO's KL.
"""

from __future__ import annotations

from trajforge.policies.loading import load_base
from trajforge.train.settings import LoraSettings


def lora_model(path: str, cfg: LoraSettings, init_adapter: str | None = None, device: str | None = None):
    """(peft model, tokenizer) on ``device`` (default: ``cfg.device``, else the best one)."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model, prepare_model_for_kbit_training

    if init_adapter and cfg.load_in != "none":
        raise ValueError("--init-adapter with --load-in-4bit/8bit is not supported: merging an adapter into a "
                         "quantized base is lossy. Merge it into a full-precision copy of the base first")
    net, tok, _ = load_base(path, cfg.dtype, device or cfg.device, cfg.load_in)
    if init_adapter:
        from trajforge.policies.hf import adapter_lineage

        tok = _tokenizer_of(init_adapter, tok)
        for step in adapter_lineage(init_adapter):  # a DPO adapter sits on its SFT adapter, etc.
            net = PeftModel.from_pretrained(net, step).merge_and_unload()
    if cfg.load_in != "none":
        net = prepare_model_for_kbit_training(net, use_gradient_checkpointing=cfg.gradient_checkpointing is not False)
    torch.manual_seed(cfg.seed)
    net = get_peft_model(net, LoraConfig(r=cfg.r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.dropout,
                                         target_modules=cfg.targets, task_type="CAUSAL_LM",
                                         layers_to_transform=adapted_layers(net.config, cfg.lora_layers)))
    if cfg.gradient_checkpointing:  # None (SFT's auto) stays off until train_sft decides
        enable_checkpointing(net)
    return net, tok


def enable_checkpointing(net) -> None:
    """Activation checkpointing on the peft model, unless FSDP checkpoints the layers itself."""
    if fsdp_checkpoints():
        return
    # Non-reentrant checkpointing: works with frozen inputs (no enable_input_require_grads hack),
    # with DDP's hooks and with torch.compile.
    # Active only in train mode, so in-loop evaluation and rollouts still generate with a cache.
    checkpointing(net)
    # transformers then also makes the input embeddings' output require a gradient, which only
    # reentrant checkpointing needs; it would push the backward through every layer, the
    # frozen ones below ``--lora-layers`` included.
    net.disable_input_require_grads()


def checkpointing(net) -> None:
    """Turn on non-reentrant activation checkpointing by the name this transformers knows:
    ``activation_checkpointing_enable`` from 5.2x on (``gradient_checkpointing_enable``, its
    deprecated alias there, warns in every training log), the old name before."""
    enable = getattr(net, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        net.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def adapted_layers(config, top: int) -> list[int] | None:
    """The decoder layers ``--lora-layers N`` adapts: the top N (None: every layer)."""
    if not top:
        return None
    layers = getattr(config, "num_hidden_layers", None)
    if layers is None:
        raise ValueError(f"lora_layers={top} needs the model's layer count, and its config "
                         f"({type(config).__name__}) has no num_hidden_layers")
    if top > layers:
        raise ValueError(f"lora_layers={top}, but the model has {layers} decoder layers")
    return list(range(layers - top, layers))


def fsdp_checkpoints() -> bool:
    """Will FSDP checkpoint the decoder layers itself (``accelerate launch`` with an FSDP config whose
    ``fsdp_activation_checkpointing`` is on, as ``--distributed fsdp`` writes)? Then the model's own
    checkpointing stays off: both at once recompute every layer twice and all-gather its shards
    again in the backward pass (transformers' Trainer gives the same advice)."""
    import os

    return (os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"
            and os.environ.get("FSDP_ACTIVATION_CHECKPOINTING", "").lower() == "true")


def _tokenizer_of(adapter: str, fallback):
    """The tokenizer saved with an adapter (it may carry added tokens), else the base's."""
    from pathlib import Path

    from transformers import AutoTokenizer

    if not (Path(adapter) / "tokenizer_config.json").exists():
        return fallback
    tok = AutoTokenizer.from_pretrained(adapter)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok
