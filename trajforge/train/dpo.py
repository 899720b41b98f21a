"""DPO from the store: successes preferred over failures on the same task, LoRA, same renderer.

Pairs come from graded trajectories of one task (several samples of one policy, or a mix such
as the expert's successes and a tuned model's failures): chosen is a correct episode (higher
reward first, then fewer turns), rejected is a failed one or a correct one with clearly lower
reward. ``env_fault`` episodes are never used: an infrastructure failure is not the model's; nor
are those whose grading raised (``grade_error``): nobody knows whether they were right.

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

import dataclasses
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

from trajforge.grade.pools import ungradable
from trajforge.policies.models import resolve
from trajforge.schema import Trajectory
from trajforge.train.demos import DemoRule, inherited_demos
from trajforge.train.inloop import InLoopEval
from trajforge.train.losses import dpo_loss, lm_loss_sum, sequence_logprobs
from trajforge.train.loop import CallBatches, Runtime, fit
from trajforge.train.model import lora_model
from trajforge.train.replay import draw_replay
from trajforge.train.sequences import Sample, SequenceBuilder, collate, loss_tokens, turn_learns
from trajforge.train.settings import LoraSettings
from trajforge.train.toolsets import check_fingerprints, fingerprint_meta, toolset_lookup


class DPOConfig(LoraSettings):
    """DPO hyper-parameters (adapter, optimiser and checkpoint settings in ``LoraSettings``)."""

    lr: float = Field(5e-5, gt=0)
    """Peak learning rate (DPO wants less than SFT)."""
    batch_size: int = 2
    """Pairs per forward/backward pass on one device (each is two sequences)."""
    grad_accum: int = 2
    """Micro-batches of pairs per optimizer step."""
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
    replay_share: float = Field(0.3, ge=0, lt=1)
    """Share of general-instruction replay rows per micro-batch, trained with plain NLL beside DPO
    (self-distilled from the starting model; 0 turns it off)."""


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
    """Mean implicit-reward margin per micro-batch (rises as the policy learns the preference)."""
    accuracy: list[float]
    """Share of pairs per micro-batch whose margin is positive."""
    seconds: float
    tokens: int = 0
    """Tokens of both sides of every pair the optimizer steps went over, on every process and
    before a resume too (the reference's one forward pass over them not counted): what the run
    processed, beside SFT's and RFT's."""
    skipped_nonfinite: int = 0
    resumed_from: int = 0
    stopped: str | None = None
    """Why training ended before its planned steps (``time budget``), else None."""
    peak_memory_gb: float = 0.0
    """Peak memory of the (main) training process."""


def _rank(t: Trajectory) -> tuple:
    return (bool(t.outcome.positive), t.reward.total if t.reward else 0.0, -len(t.steps))


def first_divergence(a: Trajectory, b: Trajectory) -> int | None:
    """Index of the first assistant turn whose text differs (None if one is a prefix of the other)."""
    ta, tb = _turn_texts(a), _turn_texts(b)
    for i, (x, y) in enumerate(zip(ta, tb)):
        if x != y:
            return i
    return None


def _turn_texts(traj: Trajectory) -> list[str]:
    """Each assistant turn as prompts show it (``Dialect.assistant_text``). Why not ``content``: a
    turn without raw text (an import, a native call) is its calls, and two turns that call
    differently often share the text around the calls; comparing that text let the pair's
    contexts differ before the turn taken as the divergence."""
    from trajforge.parse import get_dialect

    dialect = get_dialect(traj.dialect)
    return [dialect.assistant_text(m) for m in traj.messages if m.role == "assistant"]


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
        elif ungradable(t):
            skipped["grade_error"] += 1  # graded failed, but its answer may have been right
        else:
            by_task[t.task_id].append(t)
    pairs: list[Pair] = []
    for task_id, group in sorted(by_task.items()):
        ranked = sorted(group, key=_rank, reverse=True)
        # A lucky guess is never chosen; against a grounded success it is a rejected.
        chosen = [t for t in ranked if t.outcome.positive]
        made = 0
        for c in chosen:
            for r in reversed(ranked):  # worst first
                if made >= max_per_task:
                    break
                gap = (c.reward.total if c.reward else 0) - (r.reward.total if r.reward else 0)
                if r is c or (r.outcome.positive and gap < min_reward_gap):
                    continue
                turn = first_divergence(c, r) if mode == "turn" else None
                if mode == "turn" and turn is None:
                    skipped["no_divergence"] += 1
                    continue
                learned = [turn] if mode == "turn" else range(len(c.steps))
                if not any(c.turn_learns(i) for i in learned):
                    # The chosen's loss turns are all ones SFT masks (a marked mistake, a recovered
                    # episode's failed turn): preferring them would teach exactly those turns.
                    skipped["chosen_masked"] += 1
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
    solved = {t.task_id for t in samples if t.outcome is not None and t.outcome.positive}
    asked = {t.task_id for t in samples}
    return samples + [t for t in fallback if t.task_id in asked and t.task_id not in solved
                      and t.outcome is not None and t.outcome.positive]


def render_pair(pair: Pair, tokenizer, builder: SequenceBuilder | None = None) -> tuple[Sample, Sample]:
    """(chosen, rejected) samples, each in its own dialect, with loss on the diverging turn for
    ``turn`` pairs (whole episodes otherwise). A side whose stored ids do not pack into one
    sequence is rendered, so each side is one sample."""
    builder = builder or SequenceBuilder(tokenizer, None, toolset_of=toolset_lookup(), learn=turn_learns)
    out = []
    for t in (pair.chosen, pair.rejected):
        parts = builder.build(t, only_turn=pair.turn)
        if len(parts) != 1:
            parts = dataclasses.replace(builder, stored_ids=False, counts={}).build(t, only_turn=pair.turn)
        out.append(parts[0])
    return out[0], out[1]


def _logps(net, rows: list[Sample], pad: int):
    b = collate(rows, pad, device=net.device)
    return sequence_logprobs(net, b["input_ids"], b["attention_mask"], b["labels"])


def reference_logps(net, samples: list[tuple[Sample, Sample]], pad: int, chunk: int = 8):
    """Log-probs of (chosen, rejected) under the starting model (adapter disabled)."""
    import torch

    out = []
    with torch.no_grad(), net.disable_adapter():
        for i in range(0, len(samples), chunk):
            part = samples[i: i + chunk]
            both = _logps(net, [c for c, _ in part] + [r for _, r in part], pad)
            out += list(zip(both[: len(part)].tolist(), both[len(part):].tolist()))
    return out


def pair_steps(n: int, cfg: DPOConfig, world: int, rank: int) -> list[list[list[int]]]:
    """Per optimizer step, this process's micro-batches of pair indices: the epochs' shuffled order
    cut into micro-batches of ``batch_size``, ``grad_accum × world`` per step, dealt round-robin."""
    order = _epoch_order(n, cfg)
    micro = [order[i: i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
    per_step = cfg.grad_accum * world
    steps = [micro[i: i + per_step] for i in range(0, len(micro), per_step)]
    return [step[rank::world] for step in steps]


def trained_tokens(rendered: list[tuple[Sample, Sample]], cfg: DPOConfig, world: int, ran: int) -> int:
    """Tokens of both sides of every pair the first ``ran`` optimizer steps went over, on every
    process (as SFT counts): ``pair_steps`` deals each step's ``grad_accum × world`` micro-batches
    of the epochs' order, so those steps covered the order's first ``ran × grad_accum × world ×
    batch_size`` pairs."""
    used = _epoch_order(len(rendered), cfg)[: ran * cfg.grad_accum * world * cfg.batch_size]
    return sum(len(rendered[i][0].input_ids) + len(rendered[i][1].input_ids) for i in used)


def train_dpo(trajs: list[Trajectory], model: str, out_dir: str | Path, cfg: DPOConfig | None = None,
              init_adapter: str | None = None, progress: bool = True, resume: bool = False,
              evaluator: InLoopEval | None = None, replay: list[Sample] | None = None) -> DPOResult:
    import torch

    from trajforge.train.sft import share_prefix, shared_replay

    cfg = cfg or DPOConfig()
    started = time.perf_counter()
    pairs, skipped = build_pairs(trajs, cfg.pairs, cfg.max_pairs_per_task, cfg.min_reward_gap)
    if not pairs:
        raise ValueError(f"no preference pairs in the data (skipped: {skipped}); DPO needs tasks with "
                         "both a correct and a failed (or clearly worse) episode — collect several "
                         "samples per task at temperature > 0")
    sides = [p.chosen for p in pairs] + [p.rejected for p in pairs]
    fingerprints = check_fingerprints(sides)
    runtime = Runtime(cfg)
    path = resolve(model)
    net, tok = lora_model(path, cfg, init_adapter, device=str(runtime.device))
    # A recovered chosen episode's mistaken and failed turns carry no loss (turn_learns), as in SFT;
    # on top of an adapter trained with retrieved demonstrations both sides show its block.
    shown = inherited_demos(init_adapter, out_dir, runtime.is_main)
    rules = (DemoRule(shown.demos, toolset_lookup()),) if shown else ()
    builder = SequenceBuilder(tok, None, toolset_of=toolset_lookup(), rules=rules, learn=turn_learns)
    rendered, kept = [], []
    for p in pairs:
        c, r = render_pair(p, tok, builder)
        if max(len(c.input_ids), len(r.input_ids)) > cfg.max_len:
            skipped["too_long"] = skipped.get("too_long", 0) + 1
        else:
            rendered.append((c, r))
            kept.append(p)
    if not rendered:
        raise ValueError(f"no pair fits --max-len {cfg.max_len} (skipped: {skipped})")
    steps = pair_steps(len(rendered), cfg, runtime.world, runtime.rank)
    total = len(steps) if cfg.max_steps <= 0 else min(len(steps), cfg.max_steps)
    if cfg.replay_share > 0 and replay is None:
        replay = shared_replay(runtime, net, tok, path, init_adapter)
    per_micro = round(cfg.batch_size * cfg.replay_share / (1 - cfg.replay_share)) if cfg.replay_share else 0
    extra = draw_replay(replay or [], sum(len(s) for s in steps) * per_micro, cfg.seed + runtime.rank)
    pad = tok.pad_token_id
    share = share_prefix(cfg, runtime)
    mine = sorted({i for step in steps[:total] for idx in step for i in idx})
    net.eval()  # the reference is the starting model without dropout
    ref = dict(zip(mine, reference_logps(net, [rendered[i] for i in mine], pad)))
    margins: list[float] = []
    accuracy: list[float] = []
    offsets = [sum(len(x) for x in steps[:i]) for i in range(len(steps))]  # replay slot of a step's first micro

    def micro_batch(idx: list[int], slot: int) -> dict:
        rows = extra[slot * per_micro: (slot + 1) * per_micro]
        sides_ = [rendered[i][0] for i in idx] + [rendered[i][1] for i in idx]
        return {"pairs": collate(sides_, pad, device=runtime.device), "n": len(idx),
                "ref": torch.tensor([ref[i] for i in idx], device=runtime.device).T,
                "replay": collate(rows, pad, device=runtime.device) if rows else None,
                "counts": {"pairs": len(idx), "replay_tokens": sum(loss_tokens(r) for r in rows)}}

    def loss_fn(model_, m, totals):
        b, n = m["pairs"], m["n"]
        logp = model_(sequence_logprobs, b["input_ids"], b["attention_mask"], b["labels"], share)
        losses, margin = dpo_loss(logp[:n], logp[n:], m["ref"][0].to(logp.dtype), m["ref"][1].to(logp.dtype),
                                  cfg.beta, reduction="none")
        loss = losses.sum() / max(1.0, totals["pairs"])
        stats = {"margin": float(margin.mean()), "accuracy": float((margin > 0).float().mean())}
        if m["replay"] is not None:
            r = m["replay"]
            nll = model_(lm_loss_sum, r["input_ids"], r["attention_mask"], r["labels"], share)
            loss = loss + nll / max(1.0, totals["replay_tokens"])
            stats["replay_nll"] = float(nll.detach()) / max(1, m["counts"]["replay_tokens"])
        return loss, stats

    hook = evaluator.hook(net, tok) if evaluator else None
    fitted = fit(net, total, CallBatches(lambda step: [micro_batch(idx, offsets[step] + j)
                                                      for j, idx in enumerate(steps[step])]),
                 _tracked(loss_fn, margins, accuracy), cfg, out_dir, "dpo", progress, resume, hook, runtime)
    ran = len(fitted.losses) + fitted.skipped_nonfinite  # every step taken, those before a resume too
    tokens = trained_tokens(rendered, cfg, runtime.world, ran)
    result = DPOResult(adapter_dir=str(out_dir), pairs=len(kept), skipped=skipped, steps=len(fitted.losses),
                       losses=fitted.losses, margins=margins, accuracy=accuracy,
                       seconds=time.perf_counter() - started, tokens=tokens, skipped_nonfinite=fitted.skipped_nonfinite,
                       resumed_from=fitted.resumed_from, stopped=fitted.stopped,
                       peak_memory_gb=fitted.peak_memory_gb)
    if runtime.is_main:
        from trajforge.train.adapter import lineage_ref, save_adapter

        save_adapter(runtime.acc.unwrap_model(net), tok, out_dir, {
            "recipe": "dpo", **fingerprint_meta(sides, fingerprints), **({"demos": shown.meta} if shown else {}),
            "dialect": pairs[0].chosen.dialect, "base_model": model,
            "init_adapter": lineage_ref(init_adapter),
            "config": cfg.model_dump(), "result": result.model_dump(exclude={"losses", "margins", "accuracy"})})
    runtime.barrier()
    return result


def _tracked(loss_fn, margins: list[float], accuracy: list[float]):
    """``loss_fn`` that also records each micro-batch's margin and accuracy for the result."""
    def wrapped(model_, m, totals):
        loss, stats = loss_fn(model_, m, totals)
        margins.append(stats["margin"])
        accuracy.append(stats["accuracy"])
        return loss, stats
    return wrapped


def _epoch_order(n: int, cfg: DPOConfig) -> list[int]:
    rng = random.Random(cfg.seed)
    order: list[int] = []
    for _ in range(max(1, int(-(-cfg.epochs // 1)))):
        epoch = list(range(n))
        rng.shuffle(epoch)
        order += epoch
    return order[: max(1, int(n * cfg.epochs))]


# Names this module imported in 0.1 (deprecated; see trajforge/_compat.py).
from trajforge._compat import moved_names  # noqa: E402

__getattr__ = moved_names(__name__, {
    "env_class": "trajforge.envs",
    "get_dialect": "trajforge.parse",
    "masked_lm_loss": "trajforge.train.losses",
    "render_sample": "trajforge.train.data",
    "save_adapter": "trajforge.train.adapter",
})
