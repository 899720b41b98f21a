"""Settings every recipe shares: the adapter, the optimiser, the hardware, checkpoints, budgets.

The values here are the library's defaults, kept in one place; the recipes' configs
(``SFTConfig``, ``DPOConfig``, ``GRPOConfig``) override what differs for them and the CLI options
are generated from these classes, so a default is never typed twice.

Batch sizes follow the convention of transformers and accelerate: ``batch_size`` is what one
forward/backward pass takes on one device (the memory knob); one optimizer step sees
``batch_size × grad_accum × processes`` sequences (the learning knob). A 7B LoRA on one 24 GB
card reaching an effective batch of 32: ``--batch-size 4 --grad-accum 8``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Distributed = Literal["ddp", "zero2", "zero3", "fsdp"]
Quantization = Literal["none", "4bit", "8bit"]


class LoraSettings(BaseModel):
    """Adapter, optimiser, hardware and checkpoint settings shared by every recipe."""

    # Field docstrings become each field's description: the CLI's help text (cli/config_options.py).
    model_config = ConfigDict(use_attribute_docstrings=True)

    r: int = 32
    """LoRA rank."""
    alpha: int | None = None
    """LoRA alpha (None: 2 × r, the usual scale)."""
    dropout: float = 0.05
    """LoRA dropout."""
    targets: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    """Modules that get adapters."""
    lora_layers: int = 0
    """Adapt only the top N decoder layers (0: every layer). The backward pass then stops at the
    lowest adapted layer, as nothing below it needs a gradient: on the embedded model's 30 layers,
    the top 10 made the demo's SFT 1.5× faster (measured) and keep a third of the activations."""
    lr: float = Field(2e-4, gt=0)
    """Peak learning rate (cosine decay, short warm-up)."""
    batch_size: int = 2
    """Sequences (or pairs) per forward/backward pass on one device (SFT: derived, train/defaults.py)."""
    grad_accum: int = 4
    """Micro-batches whose gradients add up to one optimizer step."""
    seed: int = 0
    """Seed for data order, dropout, sampling and LoRA init."""
    max_steps: int = -1
    """Stop after this many optimizer steps (-1: the recipe's natural length)."""
    max_len: int = 4096
    """Samples longer than this many tokens are skipped, counted and reported, never cut."""
    device: str | None = None
    """Device to train on: cuda, cuda:N, mps or cpu (None: $TRAJFORGE_DEVICE, else the best one).
    Under ``accelerate launch`` each process takes its own GPU."""
    dtype: str = "auto"
    """Base-model weights: auto (bf16 where the device computes it natively), float32 or bfloat16.
    Adapter weights and optimizer state stay fp32; matmuls run under bf16 autocast."""
    gradient_checkpointing: bool = True
    """Recompute each layer's activations in the backward pass instead of keeping them: activation
    memory falls from ~all layers' to one layer's, for ~30% more compute."""
    share_prefix: bool = True
    """Run the prompt prefix a batch shares once through a KV cache (off under gradient
    checkpointing, which cannot hold a cache; the run logs why)."""
    load_in: Quantization = "none"
    """Quantize the frozen base model with bitsandbytes (QLoRA; CUDA only)."""
    distributed: Distributed = "ddp"
    """How several processes share the work: ddp (replicated model), zero2 / zero3 (DeepSpeed)
    or fsdp. Only used when the run has more than one process."""
    checkpoint_every: int = 0
    """Write a resumable checkpoint every N steps (0: only the final adapter)."""
    keep_checkpoints: int = 2
    """How many checkpoints to keep on disk."""
    eval_every: int = 0
    """Run the in-loop evaluation every N steps (0: never; needs eval tasks)."""
    max_seconds: float = 0.0
    """Time budget: stop before a step that would end past this many seconds of training, judged
    by the mean step time so far (0: no limit). The learning-rate schedule stays the one planned
    for the full run, so a stopped run ends before its decay finishes; the adapter is saved as
    usual (with ``checkpoint_every`` on, a checkpoint at the stop too, so a resume with a larger
    budget goes on from there) and ``FitResult.stopped`` says why it ended early."""

    @model_validator(mode="after")
    def _check(self):
        for name in ("r", "batch_size", "grad_accum", "max_len"):
            if getattr(self, name) is not None and getattr(self, name) < 1:  # SFT: None = derived
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        # A negative period was taken as a period: --checkpoint-every -1 checkpointed every step.
        for name, zero in (("lora_layers", "every layer"), ("checkpoint_every", "off"), ("eval_every", "off")):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 ({zero}) or more, got {getattr(self, name)}")
        if self.alpha is None:
            self.alpha = 2 * self.r  # recorded concretely in the adapter's meta
        return self

    @property
    def lora_alpha(self) -> int:
        return self.alpha if self.alpha is not None else 2 * self.r


class SamplingSettings(BaseModel):
    """How the rounds recipes (RFT, online DPO) sample their attempts from the current adapter in
    the evaluation harness."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    temperature: float = 0.7
    """Sampling temperature of the attempts."""
    sample_batch: int = 48
    """Episodes generated together by the sampling policy."""
    max_new_tokens: int = 192
    """Tokens per sampled turn; more where the sampled adapter learned longer turns
    (``policies.hf.turn_budget``)."""
    max_turns: int = 8
    """Turns per sampled episode."""
