"""GRPO with the environment in the loop: rollouts in the real harness, group-relative advantages.

Each step:
1. pick ``batch_size`` tasks (from the curriculum's unlocked tiers, or uniformly);
2. run ``group_size`` multi-turn rollouts per task with the *current* weights, sampled at
   ``temperature``, in the same harness as evaluation (real tools, real parser); optionally with
   guided exploration (harness/explore.py) rescuing failing rollouts;
3. grade every rollout and compute its composite reward R (grade/reward.py, all components kept;
   ``rewards`` may weigh each environment or task type its own way, ``RewardConfig.per``);
4. advantage = (R − group mean) / group std (``train/losses.group_advantages``); groups whose
   rollouts all score the same carry no signal and are dropped before any forward pass;
5. loss on the policy's own sampled tokens only: a rollout's steps are packed into as few
   sequences as exactness allows (``pack_steps``), built from ``prompt_ids + completion_ids``
   exactly as generated (never re-tokenised text), with loss on each step's ``completion_ids``
   span; prompts and tool results are context with zero weight. Clipped surrogate,
   optional k3 KL to the reference (the starting model: adapter disabled), token-mean
   (``loss_norm="sequence"``: a mean per rollout, then over rollouts).

Rollouts come from the local hf policy here. At scale, the same loss takes rollouts from a vLLM /
SGLang server that returns token ids (policies/openai.py stores them on the step); only step 2
changes. Library: ``train_grpo(tasks, model, out_dir, GRPOConfig())``; CLI:
``trajforge train grpo --tasks TASKS --model M [--init-adapter SFT_DIR] --out DIR``.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field, field_validator

from trajforge.grade import RewardConfig, graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.harness.explore import ExplorationConfig, guided, rescue_rate
from trajforge.harness.loop import Episode
from trajforge.parse import get_dialect
from trajforge.policies.models import resolve
from trajforge.schema import Task, Trajectory
from trajforge.train.checkpoint import jsonable, tuplify
from trajforge.train.curriculum import Curriculum
from trajforge.train.demos import TrainDemos, inherited_demos
from trajforge.train.inloop import InLoopEval
from trajforge.train.losses import group_advantages, policy_gradient_loss, token_logprobs
from trajforge.train.loop import Runtime, fit
from trajforge.train.model import lora_model
from trajforge.train.sequences import IGNORE, Sample, collate, completion_tokens, pack_spans
from trajforge.train.settings import LoraSettings
from trajforge.train.toolsets import fingerprint_meta


class GRPOConfig(LoraSettings):
    """GRPO hyper-parameters (adapter, optimiser and checkpoint settings in ``LoraSettings``)."""

    lr: float = Field(5e-5, gt=0)
    """Peak learning rate."""
    batch_size: int = 8
    """Tasks per rollout round, over all processes (each gets ``group_size`` rollouts)."""
    grad_accum: int = 1
    """Rollout rounds per optimizer step (a larger batch, rolled out in bounded rounds)."""
    group_size: int = 4
    """G: rollouts per task; advantages are relative within this group."""
    steps: int = 20
    """Optimizer steps (``max_steps`` caps it too)."""
    temperature: float = 1.0
    """Rollout sampling temperature. The loss scores tokens at temperature 1 (ratio, KL, the
    importance-sampling correction against the log-probs servers report), not the tempered
    distribution the rollouts came from; TRL divides the logits by it instead. At 1.0 they agree."""
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
    loss_norm: Literal["token", "sequence"] = "token"
    """How the step's loss is averaged: over all its loss tokens (DAPO's token mean: a rollout
    weighs by its length, so long failed rollouts dominate — see ``down_token_share``), or per
    rollout first, then over rollouts (GRPO's original: every rollout weighs the same)."""
    micro_batch: int = 8
    """Sequences per forward/backward pass (memory bound); gradients accumulate."""
    curriculum: bool = True
    """Schedule tiers easy → medium → hard by measured success rate."""
    promote_at: float = 0.6
    """Success rate on the newest tier that unlocks the next."""
    curriculum_start: str = "easy"
    """Tier the curriculum starts at (a tuned policy that already masters easy can skip it)."""
    partial_from: str | None = None
    """A store of graded samples whose partial pool (failed after a milestone that shows it got
    close, ``grade/pools.py``) the curriculum draws half its tasks from; None: tasks uniformly per
    tier."""
    guided: bool = False
    """Guided exploration: rewind failing rollouts to the last good step and resample cooler."""
    explore: ExplorationConfig = Field(default_factory=ExplorationConfig)
    """Guided exploration settings."""
    rewards: RewardConfig = Field(default_factory=RewardConfig)
    """Composite reward weights."""
    dialect: str | None = None
    """Tool-call dialect (default: the starting adapter's, else the model's own)."""
    rollout_server: list[str] = []
    """Base URLs (``http://HOST:PORT/v1``) of OpenAI-compatible servers with vLLM's runtime LoRA
    API to sample rollouts on, requests spread across them (``train/rollout_server.py``); empty:
    sample with the local model."""
    tis_cap: float = 0.0
    """Truncated importance sampling for server rollouts: weight each token by
    min(π_trainer/π_server, cap) (0: off; 2.0 is the usual cap)."""

    @field_validator("rollout_server", mode="before")
    @classmethod
    def _servers(cls, v):
        return [] if v is None else [v] if isinstance(v, str) else v


class Packed(NamedTuple):
    """One training sequence: token ids exactly as generated, the spans that carry loss (the
    policy's sampled completions), and the rollout's index into ``Rollouts.advantages``."""

    ids: list[int]
    spans: list[tuple[int, int]]
    rollout: int
    behaviour: list[float] | None = None
    """The sampler's log-prob of each completion token, aligned with ``ids`` (server rollouts)."""


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
    sampled_tokens: int = 0
    """Completion tokens the rollouts generated (this process's)."""
    trained_tokens: int = 0
    """Tokens of the packed sequences the optimizer steps went over (groups with signal only)."""
    skipped_nonfinite: int = 0
    resumed_from: int = 0
    stopped: str | None = None
    """Why training ended before its planned steps (``time budget``), else None."""
    peak_memory_gb: float = 0.0
    """Peak memory of the (main) training process."""


def _packed(traj: Trajectory) -> list[tuple[list[int], list[tuple[int, tuple[int, int]]]]]:
    for s in traj.steps:
        if s.prompt_ids is None or not s.completion_ids:
            raise ValueError(f"rollout {traj.task_id}#{traj.sample} step {s.index} has no token ids; "
                             "GRPO trains on the exact sampled tokens")
    return pack_spans([(list(s.prompt_ids), list(s.completion_ids)) for s in traj.steps])


def pack_steps(traj: Trajectory) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """A rollout's steps as few exact sequences as possible (``train.sequences.pack_spans``):
    ``(ids, [(start, end) of each sampled completion])`` per sequence. Rollouts without token ids
    are refused: GRPO trains on the exact sampled tokens."""
    return [(ids, [span for _, span in spans]) for ids, spans in _packed(traj)]


def _behaviour(traj: Trajectory, ids: list[int], spans: list[tuple[int, tuple[int, int]]]) -> list[float] | None:
    """The sampler's log-prob of every completion token, aligned with ``ids`` (0 elsewhere), when
    the rollout server returned them for these turns; else None."""
    row = [0.0] * len(ids)
    for turn, (start, end) in spans:
        lps = traj.steps[turn].completion_logprobs
        if lps is None or len(lps) != end - start:
            return None
        row[start:end] = lps
    return row


def to_rollouts(trajs: list[Trajectory], scale: bool = True) -> Rollouts:
    """Group-relative advantages per task, then the training sequences (``pack_steps``) of each
    rollout with a non-zero advantage. Rollouts without token ids cannot be trained on exactly and
    are refused."""
    import torch
    from trajforge.grade.pools import ungradable
    from trajforge.store import is_fault

    # An episode the infrastructure ended is never a negative, nor part of its group's mean; nor is
    # one whose grading raised (reward 0 for an answer that may have been right).
    trajs = [t for t in trajs if not (is_fault(t) or ungradable(t))]
    groups: dict[str, int] = {}
    gid = [groups.setdefault(t.task_id, len(groups)) for t in trajs]
    # cpu: a few floats per rollout, turned into Python numbers for the micro-batches right away.
    rewards = torch.tensor([t.reward.total if t.reward else 0.0 for t in trajs], device="cpu")
    adv = group_advantages(rewards, torch.tensor(gid, device="cpu"), scale=scale)  # cpu: as above
    out = Rollouts(stats={"reward": float(rewards.mean()) if trajs else 0.0,
                          "solved": sum(bool(t.outcome and t.outcome.correct) for t in trajs) / max(1, len(trajs)),
                          "informative_groups": len({g for g, a in zip(gid, adv.tolist()) if a != 0}),
                          "deciding_groups": deciding_groups(trajs),
                          "groups": len(groups)})
    for t, a in zip(trajs, adv.tolist()):
        if a == 0:
            continue
        out.sequences.extend(Packed(ids, [span for _, span in spans], len(out.advantages), _behaviour(t, ids, spans))
                             for ids, spans in _packed(t))
        out.advantages.append(a)
    out.stats |= token_balance(out)
    return out


def deciding_groups(trajs: list[Trajectory]) -> int:
    """Groups holding both a solved and an unsolved rollout. A group can score differently (step
    costs, milestones) with every rollout wrong: its advantage then follows the shaping terms, not
    the answer, and the doctor tells the two apart (stop 38's rerun of stop 37's T = 1.0 arm: 39 of
    48 groups scored differently, 13 split on the answer)."""
    solved: dict[str, set[bool]] = {}
    for t in trajs:
        solved.setdefault(t.task_id, set()).add(bool(t.outcome and t.outcome.correct))
    return sum(len(v) == 2 for v in solved.values())


def token_balance(rollouts: Rollouts) -> dict[str, float]:
    """How the step's loss tokens split by the sign of their rollout's advantage.

    Why: the loss is a mean over tokens, so a rollout's weight is its length. Failed rollouts that
    run to the token limit can hold most of the tokens even when their advantages are small, and
    the step then mostly pushes sampled tokens down. ``down_token_share``: the share of loss
    tokens with a negative advantage (0.5: balanced); ``token_advantage_mean``: the per-token mean
    advantage (below 0: the step pushes down more than it pulls up)."""
    sizes = [(loss_tokens(seq), rollouts.advantages[seq.rollout]) for seq in rollouts.sequences]
    total = sum(n for n, _ in sizes)
    if not total:
        return {"down_token_share": 0.0, "token_advantage_mean": 0.0}
    return {"down_token_share": sum(n for n, a in sizes if a < 0) / total,
            "token_advantage_mean": sum(n * a for n, a in sizes) / total}


def loss_tokens(seq: Packed) -> int:
    return sum(end - start for start, end in seq.spans)


def _sample(seq: Packed) -> Sample:
    mask = [0] * len(seq.ids)
    for start, end in seq.spans:
        mask[start:end] = [1] * (end - start)
    return Sample(seq.ids, mask)


def rollout_batch(seqs: list[Packed], pad: int, device=None):
    """(input_ids, attention_mask, labels) with labels only on the sampled completion spans."""
    b = collate([_sample(s) for s in seqs], pad, device=device)
    return b["input_ids"], b["attention_mask"], b["labels"]


def micro_batches(rollouts: Rollouts, pad: int, cfg: GRPOConfig, device=None) -> list[dict[str, Any]]:
    """The step's sequences in micro-batches of ``cfg.micro_batch`` (similar lengths together),
    each with its advantages, sampler log-probs (for TIS) and loss-token count."""
    import torch

    seqs = sorted(rollouts.sequences, key=lambda s: len(s.ids))  # similar lengths → less padding
    per_rollout = rollout_tokens(rollouts)
    out = []
    for i in range(0, len(seqs), cfg.micro_batch):
        chunk = seqs[i: i + cfg.micro_batch]
        tokens = [loss_tokens(s) for s in chunk]
        inverse = [1.0 / per_rollout[s.rollout] for s in chunk]
        ids, att, labels = rollout_batch(chunk, pad, device)
        behaviour = None
        if cfg.tis_cap > 0 and all(s.behaviour is not None for s in chunk):
            width = ids.shape[1]
            behaviour = torch.tensor([s.behaviour + [0.0] * (width - len(s.behaviour)) for s in chunk],
                                     device=device)[:, 1:]  # position t scores token t+1
        out.append({"input_ids": ids, "attention_mask": att, "labels": labels, "behaviour": behaviour,
                    "advantages": torch.tensor([rollouts.advantages[s.rollout] for s in chunk], device=device),
                    "weights": torch.tensor(inverse, device=device) if cfg.loss_norm == "sequence" else None,
                    # A sequence's share of its rollout: summed over micro-batches and processes, the rollouts.
                    "counts": {"tokens": float(sum(tokens)), "rollouts": sum(n * w for n, w in zip(tokens, inverse))}})
    return out


def rollout_tokens(rollouts: Rollouts) -> dict[int, int]:
    """Loss tokens per rollout, over all its packed sequences."""
    out: dict[int, int] = {}
    for seq in rollouts.sequences:
        out[seq.rollout] = out.get(seq.rollout, 0) + loss_tokens(seq)
    return out


def micro_loss(model, micro: dict[str, Any], totals: dict[str, float], cfg: GRPOConfig, net=None,
               share: bool | None = None):
    """One micro-batch's share of the step's policy-gradient loss (+ k3 KL to the
    starting model when ``cfg.kl_beta`` > 0; ``net`` is the unwrapped peft model for that pass)."""
    import torch

    share = (cfg.share_prefix and not cfg.gradient_checkpointing) if share is None else share
    ids, att, labels = micro["input_ids"], micro["attention_mask"], micro["labels"]
    mask = labels[:, 1:] != IGNORE
    ref = None
    if cfg.kl_beta > 0:
        with torch.no_grad(), net.disable_adapter():
            ref = token_logprobs(net, ids, att, labels, share)
    logp = model(token_logprobs, ids, att, labels, share)
    # π_old: the weights that sampled the rollouts. The first update on a micro-batch runs under
    # them (ratio 1); ``updates_per_batch`` > 1 hands the same cached micro-batch to later updates,
    # whose ratio against it is what the clip acts on (re-detaching each pass made it always 1).
    old = micro.setdefault("old_logp", logp.detach())
    count = totals["rollouts"] if cfg.loss_norm == "sequence" else totals["tokens"]
    denom = torch.tensor(max(1.0, count), dtype=logp.dtype, device=logp.device)
    return policy_gradient_loss(logp, old, micro["advantages"].to(logp.dtype), mask, cfg.clip, ref,
                                cfg.kl_beta, micro["behaviour"], cfg.tis_cap, denom, micro.get("weights"))


def grpo_loss(net, rollouts: Rollouts, pad: int, cfg: GRPOConfig, backward: bool = True):
    """The whole step's loss in one process (tests, benchmarks): micro-batches whose gradients
    accumulate (``backward``); returns (detached total loss, stats)."""
    import contextlib

    import torch

    device = next(net.parameters()).device
    micro = micro_batches(rollouts, pad, cfg, device)
    totals = {k: sum(m["counts"][k] for m in micro) for k in ("tokens", "rollouts")}
    loss_sum = torch.zeros((), device=device)
    kl = 0.0
    for m in micro:
        with contextlib.nullcontext() if backward else torch.no_grad():
            loss, stats = micro_loss(lambda fn, *a: fn(net, *a), m, totals, cfg, net)
            if backward:
                loss.backward()
        loss_sum = loss_sum + loss.detach()
        kl += float(stats["kl"])
    return loss_sum, {"kl": kl, "tokens": totals["tokens"]}


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
                     served: str | None = None, shown: TrainDemos | None = None) -> list[Trajectory]:
    """``group_size`` sampled rollouts per task with the current weights, graded: locally, or on
    the rollout servers as the adapter named ``served``; ``shown``: the retrieved demonstrations
    every episode shows (inherited from the starting adapter), so the rollouts hold the block."""
    if served is not None:
        from trajforge.policies.openai import OpenAIPolicy

        policy = OpenAIPolicy(cfg.rollout_server, served, name="grpo-rollout", temperature=cfg.temperature,
                              max_tokens=cfg.max_new_tokens, batch_size=64, token_ids=True)
    else:
        from trajforge.policies.hf import HFPolicy

        policy = HFPolicy(model, name="grpo-rollout", loaded=(net, tok), temperature=cfg.temperature,
                          seed=seed, max_new_tokens=cfg.max_new_tokens, batch_size=64,
                          dialect=get_dialect(cfg.dialect) if cfg.dialect else None)
    harness = HarnessConfig(max_turns=cfg.max_turns, max_consecutive_errors=cfg.max_turns,
                            **({"demos": shown.meta["k"], "demo_pool": shown.file} if shown else {}))
    episode = guided(cfg.explore) if cfg.guided else Episode
    trajs = run_episodes(tasks, policy, harness, samples=cfg.group_size, episode=episode)
    return [graded(t, cfg.rewards) for t in trajs]


def null_micro(pad: int, device) -> dict[str, Any]:
    """A micro-batch that carries no loss: a process whose rollouts all agreed still runs one
    pass, so the processes' gradient all-reduce lines up (its loss is exactly 0)."""
    import torch

    # One scored token with advantage 0: the graph reaches the adapter (so the backward pass and its
    # all-reduce run), the gradient is exactly 0, and it counts as no token in the step's mean.
    rollouts = Rollouts(sequences=[Packed([pad, pad], [(1, 2)], 0)], advantages=[0.0])
    micro = micro_batches(rollouts, pad, GRPOConfig(micro_batch=1), device)[0]
    micro["advantages"] = torch.zeros(1, device=device)
    micro["weights"] = torch.zeros(1, device=device)  # the KL term's too: no gradient at all
    micro["counts"] = {"tokens": 0.0, "rollouts": 0.0}
    return micro


def partial_tasks(store: str | None) -> set[str]:
    """Task ids of ``store``'s partial pool (empty without a store)."""
    if not store:
        return set()
    from trajforge.grade.pools import quality_pools
    from trajforge.store import TrajectoryStore

    return quality_pools(TrajectoryStore(store).read()).partial_tasks()


GROUP_COUNTS = ("groups", "informative_groups", "deciding_groups")
"""A rollout batch's group counts (``to_rollouts``): logged once per batch, not once per update."""


class RolloutSteps:
    """GRPO's micro-batches, made on the fly: each optimizer step rolls out ``grad_accum`` rounds of
    ``batch_size`` tasks (the same draw on every process; each process takes its share of whole
    tasks, so groups never span processes), gathers every process's rewards for the step's
    statistics, computes group-relative advantages and cuts the informative rollouts into
    micro-batches."""

    def __init__(self, net, tok, model: str, tasks: list[Task], cfg: GRPOConfig, out_dir: Path,
                 runtime: Runtime, init_adapter: str | None):
        self.net, self.tok, self.model, self.tasks, self.cfg = net, tok, model, tasks, cfg
        self.out_dir, self.rt = out_dir, runtime
        self.shown = inherited_demos(init_adapter, out_dir, runtime.is_main)
        self.rng = random.Random(cfg.seed)
        self.curriculum = (Curriculum(tasks, cfg.promote_at, seed=cfg.seed, start=cfg.curriculum_start,
                                      partial=partial_tasks(cfg.partial_from))
                           if cfg.curriculum else None)
        self.rewards: list[float] = []
        self.solved: list[float] = []
        self.trajs: list[Trajectory] = []
        self.cache: dict[int, list[dict[str, Any]]] = {}
        self.cache_tokens = 0  # the cached rollouts' sequence tokens, counted again by each update
        self.trained_tokens = 0
        self.stats: dict[str, Any] = {}
        self.before_batch: dict[str, Any] = self._draws()
        """The draw state before the current rollout batch's draws (``checkpoint_state``)."""
        self.server = None
        if cfg.rollout_server:
            from trajforge.policies.hf import adapter_lineage
            from trajforge.train.rollout_server import RolloutServer

            self.server = RolloutServer(cfg.rollout_server)
            self.lineage = adapter_lineage(init_adapter) if init_adapter else []
            self.served_meta = {"recipe": "grpo-rollout", "dialect": cfg.dialect, "base_model": model}

    def prepare(self, runtime: Runtime, start: int) -> None:
        pass

    def _draws(self) -> dict[str, Any]:
        """What the task draws still to come depend on (JSON), and the per-batch results so far."""
        return {"rng": jsonable(self.rng.getstate()),
                "curriculum": self.curriculum.state() if self.curriculum else None,
                "rewards": list(self.rewards), "solved": list(self.solved)}

    def checkpoint_state(self, step: int) -> dict[str, Any]:
        """The state a run resumed before ``step`` continues from. The task RNG and the curriculum
        (its RNG, tier and recent results, which come from rollouts and cannot be replayed from the
        seed) restart from their seed otherwise, and the resumed run draws other tasks. Inside a
        rollout batch (``updates_per_batch`` > 1) a resume rolls that batch out again: it gets the
        state from before the batch's draws, so it draws the same tasks."""
        inside = step % self.cfg.updates_per_batch != 0
        return {**(self.before_batch if inside else self._draws()), "trained_tokens": self.trained_tokens}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from ``checkpoint_state`` (on resume, before the first step)."""
        self.rng.setstate(tuplify(state["rng"]))
        if self.curriculum and state["curriculum"] is not None:
            self.curriculum.load_state(state["curriculum"])
        self.rewards, self.solved = list(state["rewards"]), list(state["solved"])
        self.trained_tokens = int(state["trained_tokens"])
        self.before_batch = self._draws()

    def _pick(self) -> list[Task]:
        cfg = self.cfg
        if self.curriculum:
            return self.curriculum.sample(cfg.batch_size)
        return self.rng.sample(self.tasks, min(cfg.batch_size, len(self.tasks)))

    def _serve(self, rollout_step: int) -> str | None:
        if self.server is None:
            return None
        if self.rt.is_main:
            self.server.publish(self.net, self.lineage, self.served_meta, self.out_dir / "rollout-adapters",
                                rollout_step)
        self.rt.barrier()  # every process samples from the adapter the main one loaded
        return self.server.name_at(rollout_step)

    def for_step(self, step: int) -> list[dict[str, Any]]:
        cfg, rt = self.cfg, self.rt
        rollout_step = step // cfg.updates_per_batch
        if rollout_step not in self.cache:  # μ > 1: later updates reuse the same rollouts
            self.cache.clear()
            self.before_batch = self._draws()
            self.net.eval()
            served = self._serve(rollout_step)
            trajs: list[Trajectory] = []
            for round_ in range(cfg.grad_accum):
                mine = self._pick()[rt.rank::rt.world]
                seed = cfg.seed * 100_003 + rollout_step * 101 + round_ * 7919 + rt.rank
                trajs += collect_rollouts(self.net, self.tok, self.model, mine, cfg, seed=seed, served=served,
                                          shown=self.shown)
            self.net.train()
            self.trajs.extend(trajs)
            if self.curriculum:
                for t in trajs:
                    self.curriculum.record(t.tier, bool(t.outcome.correct), step)
            rollouts = to_rollouts(trajs, cfg.scale_advantages)
            every = rt.gather_floats([t.reward.total if t.reward else 0.0 for t in trajs])
            solved = rt.gather_floats([float(bool(t.outcome and t.outcome.correct)) for t in trajs])
            self.rewards.append(sum(every) / max(1, len(every)))
            self.solved.append(sum(solved) / max(1, len(solved)))
            micro = micro_batches(rollouts, self.tok.pad_token_id, cfg, rt.device)
            self.cache[rollout_step] = micro or [null_micro(self.tok.pad_token_id, rt.device)]
            self.cache_tokens = sum(len(seq.ids) for seq in rollouts.sequences)
            self.stats = {**rollouts.stats, "reward": self.rewards[-1], "solved": self.solved[-1]}
        else:
            # A later update on the same rollouts: their groups were logged with the first one, and
            # counted again per update they would read as μ times the groups (doctor's group_signal).
            self.stats = {k: v for k, v in self.stats.items() if k not in GROUP_COUNTS}
        self.trained_tokens += self.cache_tokens
        return self.cache[rollout_step]


def train_grpo(tasks: list[Task], model: str, out_dir: str | Path, cfg: GRPOConfig | None = None,
               init_adapter: str | None = None, progress: bool = True, resume: bool = False,
               evaluator: InLoopEval | None = None) -> GRPOResult:
    cfg = cfg or GRPOConfig()
    started = time.perf_counter()
    if not tasks:
        raise ValueError("GRPO needs training tasks")
    runtime = Runtime(cfg)
    net, tok = lora_model(resolve(model), cfg, init_adapter, device=str(runtime.device))
    if cfg.dialect is None and init_adapter:
        # Roll out in the dialect the starting adapter was trained in, not the base model's default.
        from trajforge.policies.hf import read_adapter_meta

        cfg = cfg.model_copy(update={"dialect": read_adapter_meta(init_adapter).get("dialect")})
    total = cfg.steps if cfg.max_steps <= 0 else min(cfg.steps, cfg.max_steps)
    steps = RolloutSteps(net, tok, model, tasks, cfg, Path(out_dir), runtime, init_adapter)
    from trajforge.train.sft import share_prefix

    share = share_prefix(cfg, runtime)

    def loss_fn(model_, micro, totals):
        loss, stats = micro_loss(model_, micro, totals, cfg, net, share)
        stats = {**steps.stats, **stats}
        if steps.curriculum:
            stats["tier_level"] = steps.curriculum.level
        return loss, stats

    hook = evaluator.hook(net, tok) if evaluator else None
    try:
        fitted = fit(net, total, steps, loss_fn, cfg, out_dir, "grpo", progress, resume, hook, runtime)
    finally:
        if steps.server and runtime.is_main:
            steps.server.close()
    result = GRPOResult(adapter_dir=str(out_dir), steps=len(fitted.losses), losses=fitted.losses,
                        rewards=steps.rewards, solve_rates=steps.solved, rescue=rescue_rate(steps.trajs),
                        curriculum=steps.curriculum.history if steps.curriculum else [],
                        seconds=time.perf_counter() - started, trained_tokens=steps.trained_tokens,
                        sampled_tokens=sum(completion_tokens(t) for t in steps.trajs),
                        skipped_nonfinite=fitted.skipped_nonfinite, resumed_from=fitted.resumed_from,
                        stopped=fitted.stopped, peak_memory_gb=fitted.peak_memory_gb)
    if runtime.is_main:
        from trajforge.train.adapter import lineage_ref, save_adapter

        fingerprints = sorted({t.toolset_fingerprint for t in steps.trajs})
        save_adapter(runtime.acc.unwrap_model(net), tok, out_dir, {
            "recipe": "grpo", **(fingerprint_meta(steps.trajs, fingerprints) if fingerprints else
                                 {"toolset_fingerprint": "", "env": tasks[0].env}),
            "dialect": _text_dialect(cfg, steps.trajs, model), "base_model": model,
            "init_adapter": lineage_ref(init_adapter), **({"demos": steps.shown.meta} if steps.shown else {}),
            "config": cfg.model_dump(), "result": result.model_dump(exclude={"losses"})})
    runtime.barrier()
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


# Names this module imported in 0.1 (deprecated; see trajforge/_compat.py).
from trajforge._compat import moved_names  # noqa: E402

__getattr__ = moved_names(__name__, {
    "save_adapter": "trajforge.train.adapter",
})
