"""Rejection-sampling fine-tuning (RFT; expert iteration, ReST-EM): the policy's own verified
attempts as new demonstrations, in rounds.

Library: ``train_rft(tasks, expert, model, out_dir, RFTConfig())``.
CLI: ``trajforge train rft --tasks tasks.jsonl --data expert-store/ --out rft/ [--init-adapter sft/]``.

Round 0 is the starting policy: ``init_adapter`` (e.g. the SFT adapter), else an SFT adapter
trained here on the expert store. Each round r = 1..N then

1. samples ``attempts`` episodes per training task at ``temperature`` from round r-1's adapter,
   in the same harness as evaluation, graded and appended to ``OUT/samples`` (resumable: a rerun
   keeps what was collected);
2. keeps the verified ones, ``success`` and ``recovered`` only (``env_fault`` is never data),
   per task deduplicated by their tool-call sequence, fewest turns first (then fewest completion
   tokens), at most ``keep_per_task``; lucky guesses (``Outcome.guessed``) never;
   with ``mistake_attempts``, as many more attempts per task start from a planned mistake
   (``MistakeFirstPolicy``: the expert's reference up to a realistic mistake, executed for real,
   then the policy): their verified recoveries are kept apart (up to ``keep_per_task`` more),
   the mistaken turns masked, so the policy learns recoveries written in its own words;
   calls kept in an earlier round are not kept again, except, in a ``warm_start`` round, on the
   tasks the round solved in fewer than ``reinforce_below`` of its attempts;
3. trains a fresh adapter from the base on the expert demonstrations plus everything kept so far.
   ReST-EM (Singh et al., 2023) retrains from the base each round; fine-tuning the previous
   adapter again would compound its overfitting on the tasks it already solves.
   ``warm_start`` trades that for time: the round goes on from the previous round's adapter
   (a new adapter on top of it, its lineage recorded) on this round's kept attempts plus
   ``expert_mix`` times as many expert demonstrations drawn at random, a fraction of the steps.

A rerun in the same ``out_dir`` (after a crash, say) samples only what the store lacks and
retrains no round whose adapter was trained to the end on the same data, model and settings
(``ROUND_RECORD`` in each round's folder says what it was trained on).

The run ends after ``rounds`` rounds or when ``max_seconds`` (the whole run's budget, spread over
the stages still to come) is spent; the last finished round's adapter is copied into ``out_dir``
and its meta records every round. ``RFTResult`` reports tokens sampled and trained, so recipes
compare at equal work as well as equal wall time.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import random
import shutil
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from pydantic import BaseModel

from trajforge.policies import Policy
from trajforge.schema import Task, Trajectory
from trajforge.policies.hf import ADAPTER_META
from trajforge.train.sequences import completion_tokens
from trajforge.train.settings import SamplingSettings
from trajforge.train.sft import SFTConfig, SFTResult, train_sft

log = logging.getLogger(__name__)
KEPT_TIERS = ("success", "recovered")
ROUND_RECORD = "rft_round.json"
"""In a round's adapter folder: the fingerprint of what it was trained on, and its SFTResult."""


class RFTConfig(SFTConfig, SamplingSettings):
    """RFT's rounds and sampling (``SamplingSettings``); each round's SFT takes the ``SFTConfig`` fields."""

    tiers: list[str] = list(KEPT_TIERS)
    """Tiers trained on, expert data and kept samples alike (recovered: failed turns masked)."""
    rounds: int = 2
    """Sample → keep → retrain rounds after the starting policy."""
    attempts: int = 4
    """Episodes sampled per training task per round (K); 0 with ``mistake_attempts`` samples
    only from planted mistakes."""
    mistake_attempts: int = 0
    """Episodes per task per round that start from a planned mistake (``tasks.repair.Planner``:
    attempt k plays the task's k-th mistake) and continue with the policy; their verified,
    grounded recoveries are kept beside the plain attempts' keeps."""
    keep_per_task: int = 2
    """Verified, distinct attempts kept per task per round (fewest turns first)."""
    warm_start: bool = False
    """Each round fine-tunes the previous round's adapter on its own kept attempts plus
    ``expert_mix`` × as many expert demonstrations, instead of a fresh adapter from the base on
    all expert data and everything kept (ReST-EM's rule)."""
    expert_mix: float = 1.0
    """Expert demonstrations per kept attempt in a ``warm_start`` round (against forgetting the
    tasks no attempt was kept for)."""
    repair_mix: float = 0.0
    """Self-repair demonstrations (expert episodes graded ``recovered``: ``collect --policy
    repair``) per kept attempt in a ``warm_start`` round, drawn apart from ``expert_mix``'s, which
    then draws only ``success``. A warm round trains on a slice of the expert data, so a few
    repair episodes among many would mostly be left out. 0: they are drawn with the others."""
    reinforce_below: float = 0.0
    """``warm_start`` rounds only: a task whose plain attempts this round were verified in fewer
    than this share of them keeps its verified attempts again, even those whose calls an earlier
    round kept. A warm round trains only on its own keeps, so with distinct-only keeping a policy
    that repeats its successes stops learning after round 1 on exactly the tasks it still fails
    sometimes (stop 37's testbed: kept 5, then 0 in 11 rounds). 1.0: every task not solved in
    every attempt; 0: only calls never kept before."""


class RoundResult(BaseModel):
    round: int
    adapter_dir: str
    sampled: int = 0
    """Episodes sampled this round (0 for round 0)."""
    verified: int = 0
    """Sampled episodes graded success or recovered."""
    solved_tasks: int = 0
    """Tasks with at least one verified attempt this round."""
    kept: int = 0
    """Distinct verified attempts kept this round."""
    reinforced: int = 0
    """Of those, attempts whose calls an earlier round kept (``reinforce_below``)."""
    trained_on: int = 0
    """Demonstrations the round's SFT saw (expert + kept so far)."""
    sampled_tokens: int = 0
    """Completion tokens generated by this round's attempts."""
    sample_seconds: float = 0.0
    sft: SFTResult | None = None
    """None for a round 0 given as ``init_adapter``."""


class RFTResult(BaseModel):
    adapter_dir: str
    rounds: list[RoundResult]
    seconds: float
    stopped: str | None = None
    """Why fewer than ``rounds`` rounds ran (``time budget``), else None."""

    @property
    def trained_tokens(self) -> int:
        return sum(r.sft.tokens for r in self.rounds if r.sft)

    @property
    def sampled_tokens(self) -> int:
        return sum(r.sampled_tokens for r in self.rounds)


def call_signature(traj: Trajectory) -> tuple:
    """What an attempt did: its tool calls in order, arguments in a canonical form, and the turns
    whose call could not be read (by their error), so that recoveries from a cut-off call and from
    a call to a tool that does not exist are two attempts, not one."""
    return tuple(sig for s in traj.steps
                 for sig in ([("!", e.kind) for e in s.errors]
                             + [(c.name, json.dumps(c.arguments, sort_keys=True, default=str)) for c in s.calls]))


def _keepable(t: Trajectory) -> bool:
    return t.outcome is not None and t.outcome.tier in KEPT_TIERS and not t.outcome.guessed


def keep_verified(trajs: Iterable[Trajectory], per_task: int,
                  seen: set[tuple] | None = None, again: Collection[str] = ()) -> list[Trajectory]:
    """The verified attempts worth training on: ``success``/``recovered`` only and not
    ``guessed`` (a right answer no result held teaches guessing), per task distinct
    by call sequence (and distinct from ``seen``: ``(task_id, signature)`` pairs kept in earlier
    rounds, updated in place, except for the tasks in ``again``, which may repeat an earlier
    round's keep), fewest turns then fewest tokens first, at most ``per_task``."""
    seen = set() if seen is None else seen
    by_task: dict[str, list[Trajectory]] = {}
    for t in trajs:
        if _keepable(t):
            by_task.setdefault(t.task_id, []).append(t)
    kept = []
    for task_id in sorted(by_task):
        ranked = sorted(by_task[task_id], key=lambda t: (len(t.steps), completion_tokens(t), t.sample))
        barred = set() if task_id in again else seen  # this round's own keeps stay distinct either way
        taken = 0
        for t in ranked:
            key = (task_id, call_signature(t))
            if taken >= per_task or key in barred:
                continue
            barred.add(key)
            seen.add(key)
            kept.append(t)
            taken += 1
    return kept


def unsure_tasks(attempts: Iterable[Trajectory], below: float) -> set[str]:
    """Tasks some attempt solved but fewer than ``below`` of their attempts did (verified, not
    guessed): the ones a policy still gets wrong sometimes. An ``env_fault`` attempt counts for
    neither: the infrastructure ended it, not the policy."""
    from trajforge.store import is_fault

    tried: dict[str, list[bool]] = {}
    for t in attempts:
        if not is_fault(t):
            tried.setdefault(t.task_id, []).append(_keepable(t))
    return {k for k, v in tried.items() if any(v) and sum(v) / len(v) < below}


def sample_attempts(tasks: list[Task], policy: Policy, store_dir: Path, attempts: int, harness) -> list[Trajectory]:
    """``attempts`` graded episodes per task appended to ``store_dir``; those a previous run of the
    same policy and sampling stored are not run again. Returns those episodes, stored or new."""
    from trajforge.grade import graded
    from trajforge.harness import run_episodes, sampling_of
    from trajforge.store import TrajectoryStore, resume_keys
    from trajforge.store.jsonl import key_of

    store = TrajectoryStore(store_dir)
    sampling = sampling_of(policy)
    same_episode_rules(Path(store_dir), harness)
    skip = store.stored(policy.name, sampling, faults=False)

    with store.writer() as shard:
        def done(traj: Trajectory) -> None:
            traj.sampling = sampling
            shard.append(graded(traj))

        run_episodes(tasks, policy, harness, samples=attempts, on_done=done, skip=skip)
    # By key, not by policy name: the store may also hold an earlier run's attempts of the same
    # sampler on other tasks, more samples per task or at another temperature, which a run that
    # did not ask for them would otherwise train on.
    wanted = {k: (t.id, s) for t in tasks for s in range(attempts)
              for k in resume_keys(t.id, policy.name, s, sampling)}
    episodes: dict[tuple[str, int], Trajectory] = {}
    for t in store:  # a non-fault record of a key before a fault one
        if key_of(t) in wanted:
            episodes.setdefault(wanted[key_of(t)], t)
    return list(episodes.values())


EPISODE_RULES = "harness.json"
"""The harness settings a samples store's episodes were run under (``same_episode_rules``)."""


def same_episode_rules(store_dir: Path, harness) -> None:
    """Record the harness settings that shape an episode beside a samples store, or refuse a run
    under other ones: the resume key (task, policy, sample, sampling) does not hold them, so a rerun
    with another ``--max-turns`` would reuse episodes cut at the old limit as if they were its own."""
    from trajforge.harness.loop import episode_rules

    rules = episode_rules(harness)
    path = store_dir / EPISODE_RULES
    if path.exists():
        try:
            kept = json.loads(path.read_text())
        except ValueError:
            kept = None  # damaged: the rules below replace it
        if isinstance(kept, dict) and kept != rules:
            changed = ", ".join(f"{k} {kept.get(k)!r} -> {v!r}" for k, v in rules.items() if kept.get(k) != v)
            raise ValueError(f"{store_dir} holds episodes run under other harness settings ({changed}); "
                             "rerun with the same settings, or into another --out")
        if kept == rules:
            return
    store_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rules, sort_keys=True))


def sample_round(tasks: list[Task], policy: Policy, store_dir: Path, cfg: RFTConfig,
                 harness) -> dict[str, list[Trajectory]]:
    """A round's attempts: ``cfg.attempts`` plain ones per task and ``cfg.mistake_attempts`` that
    start from a planned mistake, by the name of the policy that sampled them (plain first)."""
    from trajforge.policies.repair import MistakeFirstPolicy
    from trajforge.tasks.repair import Planner

    by_policy = {}
    if cfg.attempts:
        by_policy[policy.name] = sample_attempts(tasks, policy, store_dir, cfg.attempts, harness)
    if cfg.mistake_attempts:
        planted = MistakeFirstPolicy(policy, Planner(tasks))
        by_policy[planted.name] = sample_attempts(tasks, planted, store_dir, cfg.mistake_attempts, harness)
    return by_policy


PolicyFor = Callable[[str, int], Policy]
"""(adapter_dir, round) → the policy that samples that round's attempts."""


def hf_sampler(model: str, cfg: RFTConfig, prefix: str = "rft") -> PolicyFor:
    """The default sampler: the round's adapter as an ``hf:`` policy at ``cfg.temperature`` (any
    config with the sampling fields: online DPO's too, named with its ``prefix``)."""
    from trajforge.policies import make_policy
    from trajforge.policies.hf import turn_budget

    def policy_for(adapter: str, round_: int) -> Policy:
        return make_policy(f"hf:{model}@{adapter}", name=sampler_name(adapter, round_, prefix),
                           temperature=cfg.temperature, batch_size=cfg.sample_batch,
                           max_new_tokens=max(cfg.max_new_tokens, turn_budget(adapter)),
                           seed=cfg.seed + round_, device=cfg.device)
    return policy_for


def sampler_name(adapter: str | Path, round_: int, prefix: str = "rft") -> str:
    """``hf_sampler``'s policy name. The adapter's digest is in it: the store resumes attempts by
    policy name, and a rerun whose earlier rounds trained other adapters must sample again, not
    reuse their attempts."""
    return f"{prefix}-round{round_}-{adapter_digest(adapter)}"


def round_key(data: list[Trajectory], model: str, cfg: SFTConfig, init_adapter: str | None = None) -> str:
    """What a round's SFT depends on: the demonstrations in order, the base model, the adapter it
    goes on from and the settings (the time budget aside: a round that finished did not depend on it)."""
    settings = cfg.model_dump(mode="json", exclude={"max_seconds"})
    # A round from the base keeps the fingerprint it had before warm starts existed.
    parts = [model, adapter_digest(init_adapter), settings] if init_adapter else [model, settings]
    # Sorted keys: moving a field within a config class (stop 40's SamplingSettings did) must not
    # make a finished round look untrained and cost a user the round's hours again.
    h = hashlib.sha256(json.dumps(parts, sort_keys=True).encode())
    for t in data:
        h.update(t.model_dump_json().encode())
    return h.hexdigest()


def trained_round(data: list[Trajectory], model: str, adapter_dir: Path, cfg: SFTConfig,
                  progress: bool, init_adapter: str | None = None) -> SFTResult:
    """The round's SFT (from ``init_adapter`` when given): the adapter already in ``adapter_dir``
    when it was trained to the end on the same data, model, start and settings, else trained now
    (and recorded so)."""
    key = round_key(data, model, cfg, init_adapter)
    record = adapter_dir / ROUND_RECORD
    if record.exists() and (adapter_dir / "adapter_model.safetensors").exists():
        try:
            kept = json.loads(record.read_text())
            if kept.get("key") == key:
                log.info("rft: %s was trained on the same data and settings; not training it again", adapter_dir)
                return SFTResult(**kept["sft"])
        except (ValueError, KeyError, TypeError) as e:  # a damaged record: train again
            log.warning("rft: %s unreadable (%s); training the round again", record, e)
    # The old record goes first: a training cut off midway may already have replaced its adapter.
    record.unlink(missing_ok=True)
    res = train_sft(data, model, adapter_dir, cfg, progress=progress, init_adapter=init_adapter)
    if res.stopped is None:  # a round the budget cut short is not what a rerun would train
        record.write_text(json.dumps({"key": key, "sft": res.model_dump(mode="json")}))
    return res


def adapter_digest(adapter: str | Path) -> str:
    """A short fingerprint of an adapter's weights (its safetensors file; "none" without one)."""
    weights = Path(adapter) / "adapter_model.safetensors"
    if not weights.exists():
        return "none"
    h = hashlib.sha256()
    with weights.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:10]


def expert_slice(expert: list[Trajectory], n: int, seed: int, tiers: Iterable[str] = KEPT_TIERS) -> list[Trajectory]:
    """``n`` expert demonstrations of ``tiers`` drawn at random (all of them when fewer)."""
    wanted = set(tiers)
    usable = [t for t in expert if t.outcome is not None and t.outcome.tier in wanted]
    return random.Random(seed).sample(usable, min(n, len(usable)))


def warm_slice(expert: list[Trajectory], kept: int, cfg: RFTConfig, r: int) -> list[Trajectory]:
    """The expert demonstrations a warm round ``r`` that kept ``kept`` attempts trains on:
    ``expert_mix`` × ``kept`` of them, and with ``repair_mix`` that many × ``kept`` self-repair
    ones (``recovered``) drawn apart."""
    if not cfg.repair_mix:
        return expert_slice(expert, round(kept * cfg.expert_mix), cfg.seed + r, cfg.tiers)
    plain = [t for t in cfg.tiers if t != "recovered"]
    repairs = expert_slice(expert, round(kept * cfg.repair_mix), cfg.seed + r, ["recovered"]) \
        if "recovered" in cfg.tiers else []
    return expert_slice(expert, round(kept * cfg.expert_mix), cfg.seed + r, plain) + repairs


class _Budget:
    """The run's time budget, spread over the stages still to come."""

    def __init__(self, seconds: float):
        self.seconds, self.began = seconds, time.perf_counter()

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.began) if self.seconds else float("inf")

    def spent(self) -> bool:
        return self.left() <= 0

    def for_sft(self) -> float:
        """The SFT fit's own ``max_seconds``: what is left (0: no limit)."""
        return max(1.0, self.left()) if self.seconds else 0.0


def train_rft(tasks: list[Task], expert: list[Trajectory], model: str, out_dir: str | Path,
              cfg: RFTConfig | None = None, init_adapter: str | None = None,
              policy_for: PolicyFor | None = None, progress: bool = True) -> RFTResult:
    """RFT rounds (see the module docstring). ``tasks``: the training tasks attempts are sampled
    on; ``expert``: graded demonstrations every round trains on; ``policy_for``: the sampler
    (default: ``hf_sampler``)."""
    from trajforge.harness import HarnessConfig

    cfg = cfg or RFTConfig()
    if cfg.rounds < 1 or cfg.keep_per_task < 1 or cfg.attempts < 0 or cfg.mistake_attempts < 0 \
            or cfg.attempts + cfg.mistake_attempts < 1:
        raise ValueError("rounds and keep_per_task must be at least 1, attempts and mistake_attempts "
                         "0 or more and not both 0")
    if cfg.expert_mix < 0:
        raise ValueError(f"expert_mix must be 0 or more, not {cfg.expert_mix}")
    if cfg.repair_mix < 0:
        raise ValueError(f"repair_mix must be 0 or more, not {cfg.repair_mix}")
    if cfg.max_seconds < 0:  # _Budget would count it as spent before round 0 began
        raise ValueError(f"the time budget (max_seconds) must be 0 (none) or more, not {cfg.max_seconds}")
    if not tasks:
        raise ValueError("no training tasks to sample attempts on")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    budget = _Budget(cfg.max_seconds)
    policy_for = policy_for or hf_sampler(model, cfg)
    sft_cfg = SFTConfig(**{k: getattr(cfg, k) for k in SFTConfig.model_fields})
    rounds: list[RoundResult] = []
    if init_adapter:
        rounds.append(RoundResult(round=0, adapter_dir=str(init_adapter)))
    else:
        first = out / "round-0"
        res = trained_round(expert, model, first, sft_cfg.model_copy(update={"max_seconds": budget.for_sft()}),
                            progress)
        rounds.append(RoundResult(round=0, adapter_dir=str(first), trained_on=len(expert), sft=res))
    kept: list[Trajectory] = []
    seen: set[tuple] = set()
    harness = HarnessConfig(max_turns=cfg.max_turns, max_consecutive_errors=2)
    stopped = None
    for r in range(1, cfg.rounds + 1):
        if budget.spent():
            stopped = "time budget"
            break
        began = time.perf_counter()
        policy = policy_for(rounds[-1].adapter_dir, r)
        store = out / "samples"
        # This round's episodes: the ones just sampled and, on a rerun, those an earlier run of
        # the same round collected; plain and mistake-first kept apart (a recovery has more turns,
        # and would never rank among a task's shortest successes).
        by_policy = sample_round(tasks, policy, store, cfg, harness)
        del policy
        gc.collect()  # the sampling model goes before the next one is loaded for training
        attempts = [t for group in by_policy.values() for t in group]
        before = set(seen)
        plain = next(iter(by_policy.values()))
        again = unsure_tasks(plain, cfg.reinforce_below) if cfg.warm_start and cfg.attempts else set()
        new = [t for group in by_policy.values() for t in keep_verified(group, cfg.keep_per_task, seen, again)]
        kept += new
        verified = [t for t in attempts if t.outcome is not None and t.outcome.tier in KEPT_TIERS]
        info = RoundResult(round=r, adapter_dir=str(out / f"round-{r}"), sampled=len(attempts),
                           verified=len(verified), solved_tasks=len({t.task_id for t in verified}), kept=len(new),
                           reinforced=sum((t.task_id, call_signature(t)) in before for t in new),
                           sampled_tokens=sum(completion_tokens(t) for t in attempts),
                           sample_seconds=round(time.perf_counter() - began, 1))
        if budget.spent():
            stopped = "time budget"
            break
        start = rounds[-1].adapter_dir if cfg.warm_start else None
        if start and not new:  # nothing new to go on with: the round keeps the previous adapter
            rounds.append(info.model_copy(update={"adapter_dir": start}))
            continue
        if start:
            data = new + warm_slice(expert, len(new), cfg, r)
        else:
            data = expert + kept
        info.sft = trained_round(data, model, Path(info.adapter_dir),
                                 sft_cfg.model_copy(update={"max_seconds": budget.for_sft()}), progress, start)
        info.trained_on = len(data)
        rounds.append(info)
    result = RFTResult(adapter_dir=str(out), rounds=rounds, stopped=stopped,
                       seconds=round(time.perf_counter() - budget.began, 1))
    _finish(out, result, cfg)
    return result


def _finish(out: Path, result: RFTResult, cfg: RFTConfig) -> None:
    """The last round's adapter into ``out``, its meta extended with every round."""
    adopt_last_round(out, Path(result.rounds[-1].adapter_dir), "rft", {
        "config": {k: getattr(cfg, k) for k in ("rounds", "attempts", "mistake_attempts", "temperature",
                                                "keep_per_task", "warm_start", "expert_mix", "repair_mix",
                                                "reinforce_below")},
        "stopped": result.stopped,
        "rounds": [r.model_dump(exclude={"sft"}) | {"sft_steps": r.sft.steps if r.sft else 0} for r in result.rounds]})


def adopt_last_round(out: Path, last: Path, recipe: str, record: dict) -> None:
    """A rounds recipe's end: the last round's adapter files copied into ``out``, its meta given
    the ``recipe`` name and, under that name, the ``record`` of the rounds."""
    if last.resolve() != out.resolve():
        for f in last.iterdir():
            if f.is_file():
                shutil.copy2(f, out / f.name)
    # Read from the last round, not from ``out``: where it has no meta, an earlier run's in ``out``
    # (its lineage above all) would otherwise describe these weights.
    kept_meta = last / ADAPTER_META
    meta = json.loads(kept_meta.read_text()) if kept_meta.exists() else {}
    meta_path = out / ADAPTER_META
    meta["recipe"] = recipe
    meta[recipe.replace("-", "_")] = record
    meta_path.write_text(json.dumps(meta, indent=2))
