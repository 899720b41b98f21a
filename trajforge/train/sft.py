"""LoRA SFT on executed trajectories, loss on assistant tokens only.

Library: ``train_sft(trajectories, model, out_dir, SFTConfig())``.
CLI: ``trajforge train sft --data STORE_DIR --model smollm2-135m --out ADAPTER_DIR``.

Samples are rendered with the inference-time dialect and chat template (train/data.py); batches
are grouped by length and share their common prefix through one KV cache (train/losses.py).
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from trajforge.envs import env_class
from trajforge.policies.models import resolve
from trajforge.schema import Trajectory
from trajforge.train.data import Sample, render_sample, training_dialect
from trajforge.train.inloop import InLoopEval
from trajforge.train.losses import IGNORE, masked_lm_loss
from trajforge.train.replay import mix_replay
from trajforge.train.trainer import LoraSettings, fit, lora_model, save_adapter


class SFTConfig(LoraSettings):
    """LoRA SFT hyper-parameters (adapter, optimiser and checkpoint settings in ``LoraSettings``)."""

    epochs: float = 2.0
    """Passes over the data."""
    max_len: int = 1536
    """Samples longer than this are skipped (and counted), never cut mid-conversation."""
    tiers: list[str] = ["success"]
    """Outcome tiers used as demonstrations."""
    replay_share: float = 0.0
    """Share of each epoch made of general-instruction replay samples (against forgetting)."""
    dialect: str | None = None
    """Tool-call dialect to train in; None: the trajectories' own, else the model's (data.training_dialect)."""
    render_mode: str = "dialect"
    """``dialect`` (its tool block) or ``template`` (the model's chat template renders the tools)."""


class SFTResult(BaseModel):
    adapter_dir: str
    samples: int
    skipped: dict[str, int]
    tokens: int
    loss_tokens: int
    steps: int
    losses: list[float]
    seconds: float
    skipped_nonfinite: int = 0
    resumed_from: int = 0
    stopped: str | None = None
    """Why training ended before its planned steps (``time budget``), else None."""


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


def _epoch_rows(samples: list[Sample], cfg: SFTConfig) -> list[dict[str, Any]]:
    """Rows for all epochs (fractional epochs allowed), each epoch in a fresh length-grouped order."""
    rows = []
    for epoch in range(max(1, math.ceil(cfg.epochs))):
        order = _length_batches(samples, cfg.batch_size, cfg.seed + epoch)
        rows += [{"input_ids": samples[i].input_ids, "loss_mask": samples[i].loss_mask} for i in order]
    return rows[: int(len(samples) * cfg.epochs)]


def _length_batches(samples: list[Sample], batch_size: int, seed: int) -> list[int]:
    """An order that puts similar lengths together (less padding) with shuffled batches."""
    rng = random.Random(seed)
    order = sorted(range(len(samples)), key=lambda i: (len(samples[i].input_ids), rng.random()))
    batches = [order[i: i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return [i for b in batches for i in b]


def train_sft(trajs: list[Trajectory], model: str, out_dir: str | Path, cfg: SFTConfig | None = None,
              allow_mismatch: bool = False, progress: bool = True, resume: bool = False,
              evaluator: InLoopEval | None = None, replay: list[Sample] | None = None) -> SFTResult:
    """Train an adapter on the successful trajectories; see the module docstring.

    ``replay``: general-instruction samples (train/replay.py) mixed in at ``cfg.replay_share``.
    ``resume`` continues from the last checkpoint in ``out_dir``; ``evaluator`` runs the in-loop
    evaluation every ``cfg.eval_every`` steps.
    """
    from transformers import AutoTokenizer

    cfg = cfg or SFTConfig()
    started = time.perf_counter()
    data, skipped = select(trajs, cfg)
    if not data:
        raise ValueError(f"no trajectories of tiers {cfg.tiers} to train on (skipped: {skipped})")
    fingerprint = check_fingerprints(data, allow_mismatch)
    path = resolve(model)
    tok = AutoTokenizer.from_pretrained(path)
    toolset = env_class(data[0].env).toolset()
    dialect = training_dialect(data, model, tok, cfg.dialect)
    samples = []
    for t in data:
        s = render_sample(t, tok, toolset, dialect, render_mode=cfg.render_mode)
        if len(s.input_ids) > cfg.max_len:
            skipped["too_long"] = skipped.get("too_long", 0) + 1
        else:
            samples.append(s)
    if replay and cfg.replay_share > 0:
        samples += mix_replay(replay, len(samples), cfg.replay_share, cfg.seed)
    rows = _epoch_rows(samples, cfg)
    net, tok = lora_model(path, cfg)
    batches = [rows[i: i + cfg.batch_size] for i in range(0, len(rows), cfg.batch_size)]
    if cfg.max_steps > 0:
        batches = batches[: cfg.max_steps]
    pad = tok.pad_token_id

    def loss_fn(batch):
        inputs = collate(batch, pad)
        return masked_lm_loss(net, inputs["input_ids"], inputs["attention_mask"], inputs["labels"]), {}

    if isinstance(evaluator, InLoopEval):  # in-loop evaluation acts in the dialect and renderer trained
        evaluator.dialect = evaluator.dialect or dialect
        evaluator.render_mode = cfg.render_mode
    hook = evaluator.hook(net, tok) if evaluator else None
    fitted = fit(net, len(batches), batches.__getitem__, loss_fn, cfg, out_dir, "sft", progress,
                 resume, hook)
    used = [r for b in batches for r in b]
    result = SFTResult(
        adapter_dir=str(out_dir), samples=len(samples), skipped=skipped,
        tokens=sum(len(r["input_ids"]) for r in used), loss_tokens=sum(sum(r["loss_mask"]) for r in used),
        steps=len(fitted.losses), losses=fitted.losses, seconds=time.perf_counter() - started,
        skipped_nonfinite=fitted.skipped_nonfinite, resumed_from=fitted.resumed_from, stopped=fitted.stopped,
    )
    save_adapter(net, tok, out_dir, {
        "recipe": "sft", "toolset_fingerprint": fingerprint, "env": data[0].env, "dialect": dialect.name,
        "render_mode": cfg.render_mode, "base_model": model, "config": cfg.model_dump(),
        "result": result.model_dump(exclude={"losses"})})
    return result
