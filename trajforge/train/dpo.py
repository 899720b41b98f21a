"""DPO from the store: successes preferred over failures on the same task, LoRA, same renderer.

Pairs come from graded trajectories of one task (several samples of one policy, or a mix such
as the expert's successes and a tuned model's failures): chosen is a correct episode (higher
reward first, then fewer turns), rejected is a failed one or a correct one with clearly lower
reward. ``env_fault`` episodes are never used: an infrastructure failure is not the model's.

Two pair shapes (``DPOConfig.pairs``):
- ``episode``: both whole episodes, loss on every assistant turn (turns the two share cancel in
  the log-ratio difference).
- ``turn``: context up to the first assistant turn where the two diverge, loss on that turn only:
  the preference is about the decision that made the difference.

Samples are rendered by ``train/data.render_sample`` (same dialect, chat template and masks as
SFT and inference). The reference is the starting model (adapter disabled), its log-probs are
computed once up front. Library: ``train_dpo(trajs, model, out_dir, DPOConfig())``; CLI:
``trajforge train dpo --data STORE --model M [--init-adapter SFT_DIR] --out DIR``.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel

from trajforge.envs import env_class
from trajforge.parse import get_dialect
from trajforge.policies.models import resolve
from trajforge.schema import Trajectory
from trajforge.train.data import Sample, render_sample
from trajforge.train.inloop import InLoopEval
from trajforge.train.losses import dpo_loss, masked_lm_loss, sequence_logprobs
from trajforge.train.replay import draw_replay
from trajforge.train.sft import check_fingerprints, collate
from trajforge.train.trainer import LoraSettings, fit, lora_model, save_adapter


class DPOConfig(LoraSettings):
    """DPO hyper-parameters (adapter, optimiser and checkpoint settings in ``LoraSettings``)."""

    lr: float = 5e-5
    """Peak learning rate (DPO wants less than SFT)."""
    batch_size: int = 4
    """Pairs per optimizer step."""
    beta: float = 0.1
    """Strength of the implicit KL to the reference."""
    epochs: float = 1.0
    """Passes over the pairs."""
    pairs: Literal["episode", "turn"] = "episode"
    """Pair shape: whole episodes, or the first diverging turn."""
    max_pairs_per_task: int = 4
    """Cap per task, so tasks with many samples don't dominate."""
    min_reward_gap: float = 0.05
    """A correct episode is a 'rejected' only if its reward is lower by at least this."""
    max_len: int = 1536
    """Pairs with a longer side are skipped (and counted)."""
    replay_share: float = 0.0
    """Share of general-instruction replay rows per step, trained with plain NLL beside DPO."""


class Pair(NamedTuple):
    task_id: str
    chosen: Trajectory
    rejected: Trajectory
    turn: int | None
    """First diverging assistant turn (``turn`` pairs), else None."""


class DPOResult(BaseModel):
    adapter_dir: str
    pairs: int
    skipped: dict[str, int]
    steps: int
    losses: list[float]
    margins: list[float]
    """Mean implicit-reward margin per step (rises as the policy learns the preference)."""
    accuracy: list[float]
    """Share of pairs per step whose margin is positive."""
    seconds: float
    skipped_nonfinite: int = 0
    resumed_from: int = 0
    stopped: str | None = None
    """Why training ended before its planned steps (``time budget``), else None."""


def _rank(t: Trajectory) -> tuple:
    return (bool(t.outcome.correct), t.reward.total if t.reward else 0.0, -len(t.steps))


def first_divergence(a: Trajectory, b: Trajectory) -> int | None:
    """Index of the first assistant turn whose text differs (None if one is a prefix of the other)."""
    ta = [m.raw if m.raw is not None else m.content for m in a.messages if m.role == "assistant"]
    tb = [m.raw if m.raw is not None else m.content for m in b.messages if m.role == "assistant"]
    for i, (x, y) in enumerate(zip(ta, tb)):
        if x != y:
            return i
    return None


def build_pairs(trajs: list[Trajectory], mode: str = "episode", max_per_task: int = 4,
                min_reward_gap: float = 0.05) -> tuple[list[Pair], dict[str, int]]:
    """Preference pairs per task; every trajectory left out is counted by reason."""
    skipped: dict[str, int] = defaultdict(int)
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        if t.outcome is None:
            skipped["ungraded"] += 1
        elif t.outcome.tier == "env_fault":
            skipped["env_fault"] += 1  # infrastructure failures are never negatives
        else:
            by_task[t.task_id].append(t)
    pairs: list[Pair] = []
    for task_id, group in sorted(by_task.items()):
        ranked = sorted(group, key=_rank, reverse=True)
        chosen = [t for t in ranked if t.outcome.correct]
        made = 0
        for c in chosen:
            for r in reversed(ranked):  # worst first
                if made >= max_per_task:
                    break
                gap = (c.reward.total if c.reward else 0) - (r.reward.total if r.reward else 0)
                if r is c or (r.outcome.correct and gap < min_reward_gap):
                    continue
                turn = first_divergence(c, r) if mode == "turn" else None
                if mode == "turn" and turn is None:
                    skipped["no_divergence"] += 1
                    continue
                pairs.append(Pair(task_id, c, r, turn))
                made += 1
        if not chosen:
            skipped["task_without_success"] += 1
        elif made == 0:
            skipped["task_without_rejected"] += 1
    return pairs, dict(skipped)


def on_policy_pool(samples: list[Trajectory], fallback: list[Trajectory]) -> list[Trajectory]:
    """The policy's own graded samples, plus ``fallback`` successes (e.g. the expert's) only for
    tasks where none of the samples succeeded.

    Why: with an expert episode in every task's pool it ranks first and becomes every chosen, so
    the first diverging turn is usually turn 0 and the pair teaches the expert's phrasing rather
    than the decision that made the difference (measured: DPO on such pairs cost 10 points of
    held-out completion). Pairs between the policy's own success and failure differ where the
    outcome was decided; the expert only fills in tasks the policy never solved."""
    solved = {t.task_id for t in samples if t.outcome is not None and t.outcome.correct}
    asked = {t.task_id for t in samples}
    return samples + [t for t in fallback if t.task_id in asked and t.task_id not in solved
                      and t.outcome is not None and t.outcome.correct]


def render_pair(pair: Pair, tokenizer) -> tuple[Sample, Sample]:
    toolset = env_class(pair.chosen.env).toolset()
    return tuple(render_sample(t, tokenizer, toolset, get_dialect(t.dialect), only_turn=pair.turn)
                 for t in (pair.chosen, pair.rejected))


def _logps(net, rows: list[Sample], pad: int):
    b = collate([{"input_ids": s.input_ids, "loss_mask": s.loss_mask} for s in rows], pad)
    return sequence_logprobs(net, b["input_ids"], b["attention_mask"], b["labels"])


def reference_logps(net, samples: list[tuple[Sample, Sample]], pad: int, chunk: int = 8):
    """Log-probs of (chosen, rejected) under the starting model (adapter disabled), computed once."""
    import torch

    out = []
    with torch.no_grad(), net.disable_adapter():
        for i in range(0, len(samples), chunk):
            part = samples[i: i + chunk]
            both = _logps(net, [c for c, _ in part] + [r for _, r in part], pad)
            out += list(zip(both[: len(part)].tolist(), both[len(part):].tolist()))
    return out


def train_dpo(trajs: list[Trajectory], model: str, out_dir: str | Path, cfg: DPOConfig | None = None,
              init_adapter: str | None = None, progress: bool = True, resume: bool = False,
              evaluator: InLoopEval | None = None, replay: list[Sample] | None = None) -> DPOResult:
    import torch

    cfg = cfg or DPOConfig()
    started = time.perf_counter()
    pairs, skipped = build_pairs(trajs, cfg.pairs, cfg.max_pairs_per_task, cfg.min_reward_gap)
    if not pairs:
        raise ValueError(f"no preference pairs in the data (skipped: {skipped}); DPO needs tasks with "
                         "both a correct and a failed (or clearly worse) episode — collect several "
                         "samples per task at temperature > 0")
    fingerprint = check_fingerprints([p.chosen for p in pairs] + [p.rejected for p in pairs])
    net, tok = lora_model(resolve(model), cfg, init_adapter)
    rendered, kept = [], []
    for p in pairs:
        c, r = render_pair(p, tok)
        if max(len(c.input_ids), len(r.input_ids)) > cfg.max_len:
            skipped["too_long"] = skipped.get("too_long", 0) + 1
        else:
            rendered.append((c, r))
            kept.append(p)
    ref = reference_logps(net, rendered, tok.pad_token_id)
    order = _epoch_order(len(rendered), cfg)
    batches = [order[i: i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
    if cfg.max_steps > 0:
        batches = batches[: cfg.max_steps]
    per_step = round(cfg.batch_size * cfg.replay_share / (1 - cfg.replay_share)) if cfg.replay_share else 0
    extra = draw_replay(replay or [], len(batches) * per_step, cfg.seed)
    margins: list[float] = []
    accuracy: list[float] = []
    pad = tok.pad_token_id

    def batch_at(step: int):
        return batches[step], extra[step * per_step:(step + 1) * per_step]

    def loss_fn(batch):
        idx, replay_rows = batch
        logp = _logps(net, [rendered[i][0] for i in idx] + [rendered[i][1] for i in idx], pad)
        rc = torch.tensor([ref[i][0] for i in idx], dtype=logp.dtype)
        rr = torch.tensor([ref[i][1] for i in idx], dtype=logp.dtype)
        loss, margin = dpo_loss(logp[: len(idx)], logp[len(idx):], rc, rr, cfg.beta)
        margins.append(float(margin.mean()))
        accuracy.append(float((margin > 0).float().mean()))
        stats = {"margin": margins[-1], "accuracy": accuracy[-1]}
        if replay_rows:
            b = collate([{"input_ids": s.input_ids, "loss_mask": s.loss_mask} for s in replay_rows], pad)
            nll = masked_lm_loss(net, b["input_ids"], b["attention_mask"], b["labels"])
            loss = loss + nll
            stats["replay_nll"] = float(nll.detach())
        return loss, stats

    hook = evaluator.hook(net, tok) if evaluator else None
    fitted = fit(net, len(batches), batch_at, loss_fn, cfg, out_dir, "dpo", progress, resume, hook)
    result = DPOResult(adapter_dir=str(out_dir), pairs=len(kept), skipped=skipped, steps=len(fitted.losses),
                       losses=fitted.losses, margins=margins, accuracy=accuracy,
                       seconds=time.perf_counter() - started, skipped_nonfinite=fitted.skipped_nonfinite,
                       resumed_from=fitted.resumed_from, stopped=fitted.stopped)
    save_adapter(net, tok, out_dir, {
        "recipe": "dpo", "toolset_fingerprint": fingerprint, "env": pairs[0].chosen.env,
        "dialect": pairs[0].chosen.dialect, "base_model": model,
        "init_adapter": str(Path(init_adapter).resolve()) if init_adapter else None,
        "config": cfg.model_dump(), "result": result.model_dump(exclude={"losses", "margins", "accuracy"})})
    return result


def _epoch_order(n: int, cfg: DPOConfig) -> list[int]:
    rng = random.Random(cfg.seed)
    order: list[int] = []
    for _ in range(max(1, int(-(-cfg.epochs // 1)))):
        epoch = list(range(n))
        rng.shuffle(epoch)
        order += epoch
    return order[: max(1, int(n * cfg.epochs))]
