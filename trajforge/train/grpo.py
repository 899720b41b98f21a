"""GRPO with the environment in the loop: rollouts in the real harness, group-relative advantages.

Each step:
1. pick ``batch_size`` tasks (from the curriculum's unlocked tiers, or uniformly);
2. run ``group_size`` multi-turn rollouts per task with the *current* weights, sampled at
   ``temperature``, in the same harness as evaluation (real tools, real parser); optionally with
   guided exploration (harness/explore.py) rescuing failing rollouts;
3. grade every rollout and compute its composite reward R (grade/reward.py, all components kept);
4. advantage = (R − group mean) / group std (``train/losses.group_advantages``); groups whose
   rollouts all score the same carry no signal and are dropped before any forward pass;
5. loss on the policy's own sampled tokens only: a rollout's steps are packed into as few
   sequences as exactness allows (``pack_steps``), built from ``prompt_ids + completion_ids``
   exactly as generated (never re-tokenised text), with loss on each step's ``completion_ids``
   span; prompts and tool results are context with zero weight. Clipped surrogate,
   optional k3 KL to the reference (the starting model: adapter disabled), token-mean.

Rollouts come from the local hf policy here. At scale, the same loss takes rollouts from a vLLM /
SGLang server that returns token ids (policies/openai.py stores them on the step); only step 2
changes. Library: ``train_grpo(tasks, model, out_dir, GRPOConfig())``; CLI:
``trajforge train grpo --tasks TASKS --model M [--init-adapter SFT_DIR] --out DIR``.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from trajforge.grade import RewardConfig, graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.harness.explore import ExplorationConfig, guided, rescue_rate
from trajforge.harness.loop import Episode
from trajforge.parse import get_dialect
from trajforge.policies.models import resolve
from trajforge.schema import Task, Trajectory
from trajforge.train.curriculum import Curriculum
from trajforge.train.inloop import InLoopEval
from trajforge.train.losses import IGNORE, group_advantages, policy_gradient_loss, token_logprobs
from trajforge.train.trainer import LoraSettings, fit, lora_model, save_adapter


class GRPOConfig(LoraSettings):
    """GRPO hyper-parameters (adapter, optimiser and checkpoint settings in ``LoraSettings``)."""

    lr: float = 5e-5
    """Peak learning rate."""
    batch_size: int = 8
    """Tasks per step (each gets ``group_size`` rollouts)."""
    group_size: int = 4
    """G: rollouts per task; advantages are relative within this group."""
    steps: int = 20
    """Optimizer steps (``max_steps`` caps it too)."""
    temperature: float = 1.0
    """Rollout sampling temperature."""
    max_turns: int = 6
    """Turns per rollout."""
    max_new_tokens: int = 160
    """Tokens per turn."""
    clip: float = 0.2
    """PPO-style ratio clip (matters when ``updates_per_batch`` > 1)."""
    kl_beta: float = 0.0
    """Weight of the k3 KL to the reference model (0: no reference pass)."""
    updates_per_batch: int = 1
    """Gradient steps per rollout batch (μ); > 1 reuses rollouts with the clipped ratio."""
    scale_advantages: bool = True
    """Divide by the group std (GRPO); False is Dr. GRPO's unscaled advantage."""
    micro_batch: int = 8
    """Sequences per forward/backward pass (memory bound); gradients accumulate."""
    curriculum: bool = True
    """Schedule tiers easy → medium → hard by measured success rate."""
    promote_at: float = 0.6
    """Success rate on the newest tier that unlocks the next."""
    curriculum_start: str = "easy"
    """Tier the curriculum starts at (a tuned policy that already masters easy can skip it)."""
    guided: bool = False
    """Guided exploration: rewind failing rollouts to the last good step and resample cooler."""
    explore: ExplorationConfig = Field(default_factory=ExplorationConfig)
    """Guided exploration settings."""
    rewards: RewardConfig = Field(default_factory=RewardConfig)
    """Composite reward weights."""
    dialect: str | None = None
    """Tool-call dialect (default: the starting adapter's, else the model's own)."""
    rollout_server: str | None = None
    """Base URL (``http://HOST:PORT/v1``) of an OpenAI-compatible server with vLLM's runtime LoRA
    API to sample rollouts on (``train/rollout_server.py``); None samples with the local model."""


class Packed(NamedTuple):
    """One training sequence: token ids exactly as generated, the spans that carry loss (the
    policy's sampled completions), and the rollout's index into ``Rollouts.advantages``."""

    ids: list[int]
    spans: list[tuple[int, int]]
    rollout: int


class Rollouts(BaseModel):
    """One step's rollouts, reduced to what the loss needs."""

    sequences: list[Packed] = []
    advantages: list[float] = []
    stats: dict[str, Any] = {}


class GRPOResult(BaseModel):
    adapter_dir: str
    steps: int
    losses: list[float]
    rewards: list[float]
    """Mean rollout reward per step."""
    solve_rates: list[float]
    """Share of rollouts solved per step."""
    rescue: dict[str, Any]
    """Guided exploration's rescue counts over the whole run."""
    curriculum: list[tuple[int, str]]
    seconds: float
    skipped_nonfinite: int = 0
    resumed_from: int = 0
    stopped: str | None = None
    """Why training ended before its planned steps (``time budget``), else None."""


def pack_steps(traj: Trajectory) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """A rollout's steps as few sequences as exactness allows: when step k+1's prompt ids start
    with step k's prompt + completion ids (the usual case: the chat template is prefix-stable and
    the sampled tokens re-tokenize to themselves), the steps share one sequence and each
    completion is a loss span in it. Otherwise a new sequence starts, so every completion is
    always scored in exactly the context it was sampled in. Packing a 3-turn rollout into one
    sequence instead of three costs a third of the tokens."""
    packed: list[tuple[list[int], list[tuple[int, int]]]] = []
    for s in traj.steps:
        if s.prompt_ids is None or not s.completion_ids:
            raise ValueError(f"rollout {traj.task_id}#{traj.sample} step {s.index} has no token ids; "
                             "GRPO trains on the exact sampled tokens")
        prompt, completion = list(s.prompt_ids), list(s.completion_ids)
        if packed and prompt[:len(packed[-1][0])] == packed[-1][0]:
            spans = packed[-1][1]
            packed[-1] = (prompt + completion, spans + [(len(prompt), len(prompt) + len(completion))])
        else:
            packed.append((prompt + completion, [(len(prompt), len(prompt) + len(completion))]))
    return packed


def to_rollouts(trajs: list[Trajectory], scale: bool = True) -> Rollouts:
    """Group-relative advantages per task, then the training sequences (``pack_steps``) of each
    rollout with a non-zero advantage. Rollouts without token ids cannot be trained on exactly and
    are refused."""
    import torch

    groups: dict[str, int] = {}
    gid = [groups.setdefault(t.task_id, len(groups)) for t in trajs]
    rewards = torch.tensor([t.reward.total if t.reward else 0.0 for t in trajs])
    adv = group_advantages(rewards, torch.tensor(gid), scale=scale)
    out = Rollouts(stats={"reward": float(rewards.mean()) if trajs else 0.0,
                          "solved": sum(bool(t.outcome and t.outcome.correct) for t in trajs) / max(1, len(trajs)),
                          "informative_groups": len({g for g, a in zip(gid, adv.tolist()) if a != 0}),
                          "groups": len(groups)})
    for t, a in zip(trajs, adv.tolist()):
        if a == 0:
            continue
        out.sequences.extend(Packed(ids, spans, len(out.advantages)) for ids, spans in pack_steps(t))
        out.advantages.append(a)
    return out


def loss_tokens(seq: Packed) -> int:
    return sum(end - start for start, end in seq.spans)


def rollout_batch(seqs: list[Packed], pad: int):
    """(input_ids, attention_mask, labels) with labels only on the sampled completion spans."""
    import torch

    width = max(len(s.ids) for s in seqs)
    ids, att, labels = [], [], []
    for s in seqs:
        gap = width - len(s.ids)
        ids.append(s.ids + [pad] * gap)
        att.append([1] * len(s.ids) + [0] * gap)
        row = [IGNORE] * width
        for start, end in s.spans:
            row[start:end] = s.ids[start:end]
        labels.append(row)
    return torch.tensor(ids), torch.tensor(att), torch.tensor(labels)


def grpo_loss(net, rollouts: Rollouts, pad: int, cfg: GRPOConfig, backward: bool = True):
    """Token-mean clipped policy-gradient loss over all rollout tokens, in micro-batches whose
    gradients accumulate (``backward``); returns (detached total loss, stats)."""
    import contextlib

    import torch

    seqs = sorted(rollouts.sequences, key=lambda s: len(s.ids))  # similar lengths → less padding
    total_tokens = sum(loss_tokens(s) for s in seqs)
    adv_all = torch.tensor(rollouts.advantages)
    loss_sum, kl_sum = torch.zeros(()), 0.0
    for i in range(0, len(seqs), cfg.micro_batch):
        chunk = seqs[i: i + cfg.micro_batch]
        ids, att, labels = rollout_batch(chunk, pad)
        mask = (labels[:, 1:] != IGNORE)
        ref = None
        if cfg.kl_beta > 0:
            with torch.no_grad(), net.disable_adapter():
                ref = token_logprobs(net, ids, att, labels)
        with contextlib.nullcontext() if backward else torch.no_grad():
            logp = token_logprobs(net, ids, att, labels)
            adv = adv_all[[s.rollout for s in chunk]].to(logp.dtype)
            loss, stats = policy_gradient_loss(logp, logp.detach(), adv, mask, cfg.clip, ref, cfg.kl_beta)
            weighted = loss * (mask.sum() / max(1, total_tokens))  # chunk mean → batch token mean
            if backward:
                weighted.backward()
        loss_sum = loss_sum + weighted.detach()
        kl_sum += stats["kl"] * float(mask.sum()) / max(1, total_tokens)
    return loss_sum, {"kl": kl_sum, "tokens": total_tokens}


def drop_solved(tasks: list[Task], measured: list[Trajectory]) -> tuple[list[Task], int]:
    """Tasks minus those every measured sample of the policy solved (a group there would agree
    and carry no gradient; filtering such prompts up front is DAPO's dynamic sampling done once).
    Tasks without measurements are kept. Returns (kept, dropped count)."""
    runs: dict[str, list[bool]] = {}
    for t in measured:
        if t.outcome is not None and t.outcome.tier != "env_fault":
            runs.setdefault(t.task_id, []).append(bool(t.outcome.correct))
    solved = {tid for tid, ok in runs.items() if len(ok) > 1 and all(ok)}
    kept = [t for t in tasks if t.id not in solved]
    return kept, len(tasks) - len(kept)


def collect_rollouts(net, tok, model: str, tasks: list[Task], cfg: GRPOConfig, seed: int,
                     served: str | None = None) -> list[Trajectory]:
    """``group_size`` sampled rollouts per task with the current weights, graded: locally, or on
    the rollout server as the adapter named ``served``."""
    if served is not None:
        from trajforge.policies.openai import OpenAIPolicy

        policy = OpenAIPolicy(cfg.rollout_server, served, name="grpo-rollout", temperature=cfg.temperature,
                              max_tokens=cfg.max_new_tokens, batch_size=64, token_ids=True)
    else:
        from trajforge.policies.hf import HFPolicy

        policy = HFPolicy(model, name="grpo-rollout", loaded=(net, tok), temperature=cfg.temperature,
                          seed=seed, max_new_tokens=cfg.max_new_tokens, batch_size=64,
                          dialect=get_dialect(cfg.dialect) if cfg.dialect else None)
    harness = HarnessConfig(max_turns=cfg.max_turns, max_consecutive_errors=cfg.max_turns)
    episode = guided(cfg.explore) if cfg.guided else Episode
    trajs = run_episodes(tasks, policy, harness, samples=cfg.group_size, episode=episode)
    return [graded(t, cfg.rewards) for t in trajs]


def train_grpo(tasks: list[Task], model: str, out_dir: str | Path, cfg: GRPOConfig | None = None,
               init_adapter: str | None = None, progress: bool = True, resume: bool = False,
               evaluator: InLoopEval | None = None) -> GRPOResult:
    cfg = cfg or GRPOConfig()
    started = time.perf_counter()
    if not tasks:
        raise ValueError("GRPO needs training tasks")
    net, tok = lora_model(resolve(model), cfg, init_adapter)
    if cfg.dialect is None and init_adapter:
        # Roll out in the dialect the starting adapter was trained in, not the base model's default.
        from trajforge.policies.hf import read_adapter_meta

        cfg = cfg.model_copy(update={"dialect": read_adapter_meta(init_adapter).get("dialect")})
    rng = random.Random(cfg.seed)
    curriculum = (Curriculum(tasks, cfg.promote_at, seed=cfg.seed, start=cfg.curriculum_start)
                  if cfg.curriculum else None)
    total = cfg.steps if cfg.max_steps <= 0 else min(cfg.steps, cfg.max_steps)
    rewards, solved, all_trajs = [], [], []
    cache: dict[int, Rollouts] = {}
    server = None
    if cfg.rollout_server:
        from trajforge.policies.hf import adapter_lineage
        from trajforge.train.rollout_server import RolloutServer

        server = RolloutServer(cfg.rollout_server)
        lineage = adapter_lineage(init_adapter) if init_adapter else []
        served_meta = {"recipe": "grpo-rollout", "dialect": cfg.dialect, "base_model": model}

    def batch_at(step: int) -> Rollouts:
        rollout_step = step // cfg.updates_per_batch
        if rollout_step not in cache:  # μ > 1: later updates reuse the same rollouts
            cache.clear()
            picked = curriculum.sample(cfg.batch_size) if curriculum else rng.sample(tasks, min(cfg.batch_size, len(tasks)))
            net.eval()
            served = (server.publish(net, lineage, served_meta, Path(out_dir) / "rollout-adapters", rollout_step)
                      if server else None)
            trajs = collect_rollouts(net, tok, model, picked, cfg, seed=cfg.seed * 100_003 + rollout_step,
                                     served=served)
            net.train()
            all_trajs.extend(trajs)
            for t in trajs:
                if curriculum:
                    curriculum.record(t.tier, bool(t.outcome.correct), step)
            cache[rollout_step] = to_rollouts(trajs, cfg.scale_advantages)
            rewards.append(cache[rollout_step].stats["reward"])
            solved.append(cache[rollout_step].stats["solved"])
        return cache[rollout_step]

    def loss_fn(rollouts: Rollouts):
        stats = dict(rollouts.stats)
        if curriculum:
            stats["tier_level"] = curriculum.level
        if not rollouts.sequences:  # every group agreed: nothing to learn from this batch
            import torch

            return torch.zeros(()), stats
        loss, extra = grpo_loss(net, rollouts, tok.pad_token_id, cfg)
        return loss, {**stats, **extra}

    hook = evaluator.hook(net, tok) if evaluator else None
    try:
        fitted = fit(net, total, batch_at, loss_fn, cfg, out_dir, "grpo", progress, resume, hook)
    finally:
        if server:
            server.close()
    result = GRPOResult(adapter_dir=str(out_dir), steps=len(fitted.losses), losses=fitted.losses,
                        rewards=rewards, solve_rates=solved, rescue=rescue_rate(all_trajs),
                        curriculum=curriculum.history if curriculum else [],
                        seconds=time.perf_counter() - started,
                        skipped_nonfinite=fitted.skipped_nonfinite, resumed_from=fitted.resumed_from,
                        stopped=fitted.stopped)
    fingerprint = all_trajs[0].toolset_fingerprint if all_trajs else ""
    save_adapter(net, tok, out_dir, {
        "recipe": "grpo", "toolset_fingerprint": fingerprint, "env": tasks[0].env,
        "dialect": _text_dialect(cfg, all_trajs, model), "base_model": model,
        "init_adapter": str(Path(init_adapter).resolve()) if init_adapter else None,
        "config": cfg.model_dump(), "result": result.model_dump(exclude={"losses"})})
    return result


def _text_dialect(cfg: GRPOConfig, trajs: list[Trajectory], model: str) -> str:
    """The dialect the adapter writes calls in. Server rollouts are recorded as ``openai`` (the
    wire format); the model itself wrote the server's text dialect."""
    if cfg.dialect:
        return cfg.dialect
    written = [t.dialect for t in trajs if t.dialect and t.dialect != "openai"]
    if written:
        return written[0]
    from trajforge.policies.models import EMBEDDED

    return EMBEDDED.get(model, {}).get("dialect", "hermes")
