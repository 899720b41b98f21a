"""Online (iterative) DPO: preference pairs sampled afresh from the policy being trained, in rounds.

Library: ``train_dpo_online(tasks, expert, model, out_dir, OnlineDPOConfig(), init_adapter=sft)``.
CLI: ``trajforge train dpo --tasks tasks.jsonl --rounds 3 --data expert-store/ --init-adapter sft/ --out dpo/``.

Each round r = 1..N samples ``attempts`` graded episodes per task at ``temperature`` from round
r-1's adapter (round 0: ``init_adapter``) in the evaluation harness, into ``OUT/samples``
(resumable, as RFT's), builds ``train_dpo``'s pairs from them (``on_policy_pool``: the expert's
episode only for a task no attempt solved), and trains a DPO round on top of that adapter, which
is also the round's reference. A round without pairs (every attempt solved, or none and no
expert episode) keeps the previous adapter. The last round's adapter is copied into ``out_dir``.

Why rounds: offline DPO's pairs come from the starting policy only. On ``benchmarks/gpu_learn.py``'s
bimodal testbed (README, stop 39), 12 offline steps at lr 5e-4 broke the call format (41/128
solved, from 40), while the same 12 steps in 3 resampled rounds solved 62/128 with the format
intact: the pairs follow the policy as it moves and the reference never drifts far behind it.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

from pydantic import BaseModel

from trajforge.schema import Task, Trajectory
from trajforge.train.dpo import DPOConfig, DPOResult, build_pairs, on_policy_pool, train_dpo
from trajforge.train.rft import PolicyFor, adopt_last_round, hf_sampler, sample_attempts
from trajforge.train.settings import SamplingSettings


class OnlineDPOConfig(DPOConfig, SamplingSettings):
    """``DPOConfig`` (whose epochs, max_steps and time budget apply to each round) plus the
    sampling rounds (``SamplingSettings``, as RFT samples); ``train dpo`` reads the rounds' and
    sampling fields only with ``--tasks``."""

    rounds: int = 3
    """Online DPO (--tasks): sample → pairs → DPO rounds."""
    attempts: int = 8
    """Online DPO (--tasks): episodes sampled per task each round (a pair needs a solved and a failed one)."""

    def offline(self) -> DPOConfig:
        """The DPO settings alone (what one round, or offline DPO, trains with)."""
        return DPOConfig(**{k: getattr(self, k) for k in DPOConfig.model_fields})


class OnlineRound(BaseModel):
    round: int
    adapter_dir: str
    sampled: int = 0
    solved: int = 0
    """Sampled episodes that succeeded (the policy's own solve rate, round by round)."""
    pairs: int = 0
    dpo: DPOResult | None = None
    sample_seconds: float = 0.0


class OnlineDPOResult(BaseModel):
    adapter_dir: str
    rounds: list[OnlineRound]
    seconds: float

    @property
    def steps(self) -> int:
        return sum(r.dpo.steps for r in self.rounds if r.dpo)


def train_dpo_online(tasks: list[Task], expert: list[Trajectory], model: str, out_dir: str | Path,
                     cfg: OnlineDPOConfig | None = None, init_adapter: str | None = None,
                     policy_for: PolicyFor | None = None, progress: bool = True) -> OnlineDPOResult:
    """Rounds of sampling and DPO (module docstring). ``policy_for(adapter, round)``: the sampler
    (default: the adapter as an ``hf:`` policy at ``cfg.temperature``)."""
    from trajforge.harness import HarnessConfig

    cfg = cfg or OnlineDPOConfig()
    if cfg.rounds < 1 or cfg.attempts < 2:
        raise ValueError(f"online DPO needs at least 1 round and 2 attempts per task (a pair), not "
                         f"rounds={cfg.rounds}, attempts={cfg.attempts}")
    if not tasks:
        raise ValueError("no training tasks to sample attempts on")
    if not init_adapter:
        raise ValueError("online DPO starts from an adapter that can already call the tools (--init-adapter, "
                         "e.g. an SFT one)")
    began = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    policy_for = policy_for or hf_sampler(model, cfg, prefix="dpo")
    harness = HarnessConfig(max_turns=cfg.max_turns, max_consecutive_errors=2)
    dpo_cfg = cfg.offline()
    rounds = [OnlineRound(round=0, adapter_dir=str(init_adapter))]
    for r in range(1, cfg.rounds + 1):
        started = time.perf_counter()
        policy = policy_for(rounds[-1].adapter_dir, r)
        samples = sample_attempts(tasks, policy, out / "samples", cfg.attempts, harness)
        del policy
        gc.collect()  # the sampling model goes before the training one is loaded
        info = OnlineRound(round=r, adapter_dir=str(out / f"round-{r}"), sampled=len(samples),
                           solved=sum(bool(t.outcome and t.outcome.positive) for t in samples),
                           sample_seconds=round(time.perf_counter() - started, 1))
        pool = on_policy_pool(samples, expert)
        if not build_pairs(pool, cfg.pairs, cfg.max_pairs_per_task, cfg.min_reward_gap)[0]:
            rounds.append(info.model_copy(update={"adapter_dir": rounds[-1].adapter_dir}))
            continue  # nothing to prefer (all solved, or none and no expert episode): the adapter stays
        info.dpo = train_dpo(pool, model, info.adapter_dir, dpo_cfg, init_adapter=rounds[-1].adapter_dir,
                             progress=progress)
        info.pairs = info.dpo.pairs
        rounds.append(info)
    result = OnlineDPOResult(adapter_dir=str(out), rounds=rounds, seconds=round(time.perf_counter() - began, 1))
    _finish(out, result, cfg)
    return result


def _finish(out: Path, result: OnlineDPOResult, cfg: OnlineDPOConfig) -> None:
    """The last round's adapter into ``out``, its meta extended with every round."""
    adopt_last_round(out, Path(result.rounds[-1].adapter_dir), "dpo-online", {
        "config": {k: getattr(cfg, k) for k in ("rounds", "attempts", "temperature", "beta", "lr", "pairs")},
        "rounds": [r.model_dump(exclude={"dpo"}) | {"dpo_steps": r.dpo.steps if r.dpo else 0} for r in result.rounds]})
