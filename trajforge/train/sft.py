"""LoRA SFT on executed trajectories, loss on assistant tokens only.

Library: ``train_sft(trajectories, model, out_dir, SFTConfig())``.
CLI: ``trajforge train sft --data STORE_DIR --model smollm2-135m --out ADAPTER_DIR``.

Built on transformers' Trainer (so accelerate/DeepSpeed/FSDP work unchanged on GPUs) with one
change in ``compute_loss``: the LM head runs only on positions that carry loss. Tool results and
prompts are most of the tokens in agent data, and the 49k-way head is a fifth of a small model's
compute, so skipping it there is a large saving on CPU with an identical loss.
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
from trajforge.policies.models import resolve
from trajforge.schema import Trajectory
from trajforge.train.data import Sample, render_sample

IGNORE = -100


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


def masked_lm_loss(model, input_ids, attention_mask, labels):
    """Mean next-token cross-entropy over positions whose label is not IGNORE.

    Runs the decoder once and the LM head only on loss positions.
    """
    import torch.nn.functional as F

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = base.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    target = labels[:, 1:]
    keep = target != IGNORE
    logits = base.lm_head(hidden[:, :-1][keep]).float()
    return F.cross_entropy(logits, target[keep])


def _length_batches(samples: list[Sample], batch_size: int, seed: int) -> list[int]:
    """An order that puts similar lengths together (less padding) with shuffled batches."""
    rng = random.Random(seed)
    order = sorted(range(len(samples)), key=lambda i: (len(samples[i].input_ids), rng.random()))
    batches = [order[i: i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return [i for b in batches for i in b]


def train_sft(trajs: list[Trajectory], model: str, out_dir: str | Path, cfg: SFTConfig | None = None,
              allow_mismatch: bool = False, progress: bool = True) -> SFTResult:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

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
    net = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    net = get_peft_model(net, LoraConfig(r=cfg.r, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                                         target_modules=cfg.targets, task_type="CAUSAL_LM"))
    losses: list[float] = []

    class _Trainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = masked_lm_loss(model, inputs["input_ids"], inputs["attention_mask"], inputs["labels"])
            losses.append(float(loss.detach()))
            return loss

        def _get_train_sampler(self, *args, **kwargs):
            return torch.utils.data.SequentialSampler(self.train_dataset)  # our length-grouped order

    args = TrainingArguments(
        output_dir=str(Path(out_dir) / "_trainer"), per_device_train_batch_size=cfg.batch_size,
        num_train_epochs=1, max_steps=cfg.max_steps, learning_rate=cfg.lr,
        lr_scheduler_type="cosine", warmup_steps=0.05, logging_steps=5, save_strategy="no",
        report_to=[], seed=cfg.seed, use_cpu=not torch.cuda.is_available(),
        remove_unused_columns=False, dataloader_num_workers=0, disable_tqdm=not progress,
    )
    trainer = _Trainer(model=net, args=args, train_dataset=rows,
                       data_collator=lambda b: collate(b, tok.pad_token_id))
    trainer.train()
    out = Path(out_dir)
    net.save_pretrained(out)
    tok.save_pretrained(out)
    result = SFTResult(
        adapter_dir=str(out), samples=len(samples), skipped=skipped,
        tokens=sum(len(r["input_ids"]) for r in rows), loss_tokens=sum(sum(r["loss_mask"]) for r in rows),
        steps=trainer.state.global_step, losses=losses, seconds=time.perf_counter() - started,
    )
    meta = {"toolset_fingerprint": fingerprint, "env": data[0].env, "dialect": data[0].dialect,
            "base_model": model, "config": cfg.model_dump(), "result": result.model_dump(exclude={"losses"})}
    (out / ADAPTER_META).write_text(json.dumps(meta, indent=2))
    return result
