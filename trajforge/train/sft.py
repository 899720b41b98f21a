"""LoRA SFT on executed trajectories, loss on assistant tokens only.

Library: ``train_sft(trajectories, model, out_dir, SFTConfig())``.
CLI: ``trajforge train sft --data STORE_DIR --model smollm2-135m --out ADAPTER_DIR``.

Samples are rendered with the inference-time dialect and chat template (train/data.py); batches
are grouped by length and share their common prefix through one KV cache (train/losses.py).
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from trajforge.envs import env_class
from trajforge.parse import get_dialect
from trajforge.policies.hf import ADAPTER_META
from trajforge.policies.models import default_dtype, resolve
from trajforge.schema import Trajectory
from trajforge.train.data import Sample, render_sample
from trajforge.train.losses import IGNORE, masked_lm_loss


class SFTConfig(BaseModel):
    """LoRA SFT hyper-parameters."""

    r: int = 32
    """LoRA rank."""
    alpha: int = 64
    """LoRA alpha."""
    dropout: float = 0.05
    """LoRA dropout."""
    targets: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    """Modules that get adapters."""
    lr: float = 2e-4
    """Peak learning rate (cosine decay, short warm-up)."""
    epochs: float = 2.0
    """Passes over the data."""
    batch_size: int = 8
    """Sequences per optimizer step."""
    max_len: int = 1536
    """Samples longer than this are skipped (and counted), never cut mid-conversation."""
    tiers: list[str] = ["success"]
    """Outcome tiers used as demonstrations."""
    seed: int = 0
    """Seed for data order, dropout and LoRA init."""
    max_steps: int = -1
    """Stop after this many optimizer steps (-1: run all epochs)."""
    dtype: str = "auto"
    """Base-model weights: auto (bf16 where the hardware does it natively), float32 or bfloat16.
    Adapter weights and optimizer state stay fp32; matmuls run under bf16 autocast."""


class SFTResult(BaseModel):
    adapter_dir: str
    samples: int
    skipped: dict[str, int]
    tokens: int
    loss_tokens: int
    steps: int
    losses: list[float]
    seconds: float


def select(trajs: list[Trajectory], cfg: SFTConfig) -> tuple[list[Trajectory], dict[str, int]]:
    """Demonstrations: graded trajectories of the configured tiers; the rest counted by reason."""
    keep, skipped = [], {}
    for t in trajs:
        tier = t.outcome.tier if t.outcome else "ungraded"
        if tier in cfg.tiers:
            keep.append(t)
        else:
            skipped[f"tier:{tier}"] = skipped.get(f"tier:{tier}", 0) + 1
    return keep, skipped


def check_fingerprints(trajs: list[Trajectory], allow_mismatch: bool = False) -> str:
    """All data must match its environment's current toolset; returns the fingerprint."""
    prints = {t.toolset_fingerprint for t in trajs}
    if len(prints) != 1:
        raise ValueError(f"training data mixes toolset fingerprints {sorted(prints)}")
    fp = prints.pop()
    current = env_class(trajs[0].env).toolset().fingerprint
    if fp != current and not allow_mismatch:
        raise ValueError(
            f"trajectories were collected with toolset {fp} but env {trajs[0].env!r} now has {current}; "
            "re-collect, or pass allow_mismatch=True to migrate"
        )
    return fp


def collate(batch: list[dict[str, Any]], pad_id: int) -> dict[str, Any]:
    import torch

    width = max(len(b["input_ids"]) for b in batch)
    ids, att, labels = [], [], []
    for b in batch:
        n = len(b["input_ids"])
        ids.append(b["input_ids"] + [pad_id] * (width - n))
        att.append([1] * n + [0] * (width - n))
        labels.append([t if m else IGNORE for t, m in zip(b["input_ids"], b["loss_mask"])]
                      + [IGNORE] * (width - n))
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(att),
            "labels": torch.tensor(labels)}


def _length_batches(samples: list[Sample], batch_size: int, seed: int) -> list[int]:
    """An order that puts similar lengths together (less padding) with shuffled batches."""
    rng = random.Random(seed)
    order = sorted(range(len(samples)), key=lambda i: (len(samples[i].input_ids), rng.random()))
    batches = [order[i: i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return [i for b in batches for i in b]


def _fit(net, rows: list[dict[str, Any]], pad_id: int, cfg: SFTConfig, progress: bool) -> list[float]:
    """AdamW with warm-up and cosine decay over length-grouped batches; returns per-step losses.

    A plain loop rather than transformers' Trainer: on these CPUs the Trainer ran ~3x slower per
    step for the same batches, and the shared-prefix loss needs the batch as one unit.
    """
    import torch
    from transformers import get_cosine_schedule_with_warmup

    from trajforge.harness.progress import progress_bar

    batches = [rows[i: i + cfg.batch_size] for i in range(0, len(rows), cfg.batch_size)]
    if cfg.max_steps > 0:
        batches = batches[: cfg.max_steps]
    params = [p for p in net.parameters() if p.requires_grad]
    device = next(net.parameters()).device
    bf16 = next(net.get_base_model().parameters()).dtype == torch.bfloat16
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    sched = get_cosine_schedule_with_warmup(opt, max(1, len(batches) // 20), len(batches))
    net.train()
    losses: list[float] = []
    with progress_bar("train sft", len(batches), progress) as advance:
        for batch in batches:
            inputs = collate(batch, pad_id)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                loss = masked_lm_loss(net, inputs["input_ids"], inputs["attention_mask"], inputs["labels"])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            advance(1)
    net.eval()
    return losses


def train_sft(trajs: list[Trajectory], model: str, out_dir: str | Path, cfg: SFTConfig | None = None,
              allow_mismatch: bool = False, progress: bool = True) -> SFTResult:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg = cfg or SFTConfig()
    started = time.perf_counter()
    data, skipped = select(trajs, cfg)
    if not data:
        raise ValueError(f"no trajectories of tiers {cfg.tiers} to train on (skipped: {skipped})")
    fingerprint = check_fingerprints(data, allow_mismatch)
    path = resolve(model)
    tok = AutoTokenizer.from_pretrained(path)
    toolset = env_class(data[0].env).toolset()
    samples = []
    for t in data:
        s = render_sample(t, tok, toolset, get_dialect(t.dialect))
        if len(s.input_ids) > cfg.max_len:
            skipped["too_long"] = skipped.get("too_long", 0) + 1
        else:
            samples.append(s)
    order = _length_batches(samples, cfg.batch_size, cfg.seed)
    epochs = max(1, math.ceil(cfg.epochs))
    rows = [{"input_ids": samples[i].input_ids, "loss_mask": samples[i].loss_mask}
            for _ in range(epochs) for i in order]
    rows = rows[: int(len(samples) * cfg.epochs)]  # fractional epochs allowed

    torch.manual_seed(cfg.seed)
    dtype = default_dtype(cfg.dtype)
    net = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    net = get_peft_model(net, LoraConfig(r=cfg.r, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                                         target_modules=cfg.targets, task_type="CAUSAL_LM"))
    losses = _fit(net, rows, tok.pad_token_id, cfg, progress)
    out = Path(out_dir)
    net.save_pretrained(out)
    tok.save_pretrained(out)
    result = SFTResult(
        adapter_dir=str(out), samples=len(samples), skipped=skipped,
        tokens=sum(len(r["input_ids"]) for r in rows), loss_tokens=sum(sum(r["loss_mask"]) for r in rows),
        steps=len(losses), losses=losses, seconds=time.perf_counter() - started,
    )
    meta = {"toolset_fingerprint": fingerprint, "env": data[0].env, "dialect": data[0].dialect,
            "base_model": model, "config": cfg.model_dump(), "result": result.model_dump(exclude={"losses"})}
    (out / ADAPTER_META).write_text(json.dumps(meta, indent=2))
    return result
