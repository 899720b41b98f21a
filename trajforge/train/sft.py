"""LoRA SFT on executed trajectories, loss on assistant tokens only.

Library: ``train_sft(trajectories, model, out_dir, SFTConfig())``.
CLI: ``trajforge train sft --data STORE_DIR --model smollm2-135m --out ADAPTER_DIR``
(``--processes N`` or ``accelerate launch`` for several GPUs; ``trajforge plan`` says what fits).

Samples come from the one sequence builder (train/sequences.py): the stored token ids where they
are this model's, else rendered with the inference-time dialect and chat template. The data loader
is prepared by accelerate (sharded across processes, moved to the device); length-grouped
micro-batches of ``batch_size`` accumulate ``grad_accum`` at a time into one optimizer step.
Without gradient checkpointing, batches share their common prefix through one KV cache
(train/losses.py).
"""

from __future__ import annotations

import logging
import math
import random
import time
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, Field, field_validator

from trajforge.policies.loading import read_chat_template, settle_template
from trajforge.policies.models import resolve
from trajforge.schema import Trajectory
from trajforge.schema.trajectory import OutcomeTier
from trajforge.harness.demos import Demos
from trajforge.train.defaults import auto_checkpointing, derive, model_params
from trajforge.train.demos import DemoRule, inherited_demos, sft_demos
from trajforge.train.inloop import InLoopEval
from trajforge.train.losses import lm_loss_sum
from trajforge.train.loop import Runtime, fit
from trajforge.train.model import lora_model
from trajforge.train.replay import mix_replay
from trajforge.train.sequences import (IGNORE, Sample, SequenceBuilder, canonical_calls, collate, longest_turn,
                                      loss_tokens, slim_detours, turn_learns, within)
from trajforge.train.settings import LoraSettings
from trajforge.train.toolsets import check_fingerprints, fingerprint_meta, toolset_lookup
from trajforge.train.data import training_dialect

log = logging.getLogger(__name__)


class SFTConfig(LoraSettings):
    """LoRA SFT hyper-parameters (adapter, optimiser, hardware and checkpoint settings in
    ``LoraSettings``)."""

    lr: float | None = Field(None, gt=0)
    """Peak learning rate (cosine decay, short warm-up); None: derived from the model's size,
    2e-4 at 7B, 1e-3 at 135M (train/defaults.py)."""
    batch_size: int | None = None
    """Sequences per forward/backward pass on one device; None (with ``grad_accum`` None too): the
    largest power of two up to the effective batch that the plan fits in the device's memory, without
    checkpointing if possible (train/defaults.py); 2 when ``grad_accum`` is given."""
    grad_accum: int | None = None
    """Micro-batches whose gradients add up to one optimizer step; None: what reaches the effective
    batch derived from the data's size, 32 for a few thousand demonstrations (train/defaults.py)."""
    epochs: float | None = Field(None, gt=0)
    """Passes over the data; None: the fewest whole passes giving 100 optimizer steps at batch 4,
    at most 3 (one from 400 demonstrations on; train/defaults.py)."""
    gradient_checkpointing: bool | None = None
    """Recompute each layer's activations in the backward pass instead of keeping them (activation
    memory falls to one layer's, for more compute and no shared-prefix cache); None: off when the
    plan says the run fits the device's memory without it, on otherwise (train/defaults.py)."""
    tiers: list[str] = ["success"]
    """Outcome tiers used as demonstrations (``success,recovered``: recovered episodes too, their
    failed and mistaken turns masked: ``Trajectory.turn_learns``)."""
    canonical: bool = True
    """Train turns whose raw text the parser repaired in the dialect's canonical call format
    (``train/sequences.canonical_calls``); the stored raw text is unchanged."""
    replay_share: float = Field(0.0, ge=0, lt=1)
    """Share of each epoch made of self-distilled general-instruction replay samples, against
    forgetting (0: none). Off by default: on the demo's pool, one pass each, 30% replay completed
    74.7% (batch 8) and 73.7% (batch 4) of the 186 held-out tasks, none 90.3%; without it the
    base's own general answers rose from 0.84 to 1.40 nats a token, with it they stayed at 0.73
    (README, "Defaults that learn"). 0.3 is the setting where forgetting matters more than the task."""
    dialect: str | None = None
    """Tool-call dialect to train in; None: the trajectories' own, else the model's (data.training_dialect)."""
    slim: bool = False
    """Train accepted episodes without their detours: failed turns a later turn made good and
    repeated calls (``train/sequences.slim_detours``; self-repair episodes stay whole)."""
    render_mode: str = "dialect"
    """``dialect`` (its tool block) or ``template`` (the model's chat template renders the tools)."""
    chat_template: str | None = None
    """Jinja chat template file to render with (None: the model's own, else the default); the adapter records it."""
    demos: int = 0
    """Most similar other training tasks shown in each sample's first user message (0: none;
    train/demos.py); evaluation and serving show the same from the pool the adapter records."""
    demo_pool: str | None = None
    """Where they come from: a store (its train split) or a demonstration pool file; None: the training data."""

    @field_validator("tiers", mode="before")
    @classmethod
    def _comma_tiers(cls, value: Any) -> Any:
        """``--tiers success,recovered`` as well as ``--tiers success --tiers recovered``."""
        if isinstance(value, str):
            value = [value]
        if isinstance(value, (list, tuple)):
            return [t.strip() for v in value for t in (v.split(",") if isinstance(v, str) else [v]) if t != ""]
        return value

    @field_validator("tiers")
    @classmethod
    def _known_tiers(cls, value: list[str]) -> list[str]:
        """Outcome tiers only: a misspelt one selected nothing, and ``ungraded`` (no outcome at all)
        crashed ``select``; episodes never graded are never demonstrations (grade them first)."""
        known = get_args(OutcomeTier)
        unknown = [t for t in value if t not in known]
        if unknown:
            raise ValueError(f"unknown outcome tier {', '.join(map(repr, unknown))}: the tiers are "
                             f"{', '.join(known)} (ungraded episodes never train: `trajforge grade` them first)")
        return value


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
    peak_memory_gb: float = 0.0
    """Peak memory of the (main) training process: CUDA allocated on a GPU, resident set on a CPU."""
    built: dict[str, int] = {}
    """Trajectories built from their stored token ids vs rendered (train/sequences.py)."""
    lr: float = 0.0
    """The peak learning rate used (given, or derived: train/defaults.py)."""
    effective_batch: int = 0
    """Sequences per optimizer step: batch_size × grad_accum × processes."""


def select(trajs: list[Trajectory], cfg: SFTConfig) -> tuple[list[Trajectory], dict[str, int]]:
    """Demonstrations: graded trajectories of the configured tiers, lucky guesses
    (``Outcome.guessed``) left out; the rest counted by reason."""
    keep, skipped = [], {}
    for t in trajs:
        tier = t.outcome.tier if t.outcome else "ungraded"
        if tier in cfg.tiers and t.outcome.guessed:
            skipped["guessed"] = skipped.get("guessed", 0) + 1  # right by luck: teaches guessing
        elif tier in cfg.tiers:
            keep.append(t)
        else:
            skipped[f"tier:{tier}"] = skipped.get(f"tier:{tier}", 0) + 1
    return keep, skipped


def epoch_rows(samples: list[Sample], epochs: float, batch_size: int, seed: int, unit: int | None = None,
               step: int = 0) -> list[list[int]]:
    """Micro-batches (lists of sample indices) for all epochs, fractional epochs allowed: each epoch
    in a fresh length-grouped order (groups of ``unit`` similar lengths, less padding; groups
    shuffled), cut into micro-batches of ``batch_size``. ``unit`` None: the micro-batch itself.
    ``step``: sequences per optimizer step; each step's sequences are sorted by length before the
    cut (which step a sequence is in never changes, only its micro-batch: less padding)."""
    unit = unit or batch_size
    rows: list[int] = []
    for epoch in range(max(1, math.ceil(epochs))):
        rng = random.Random(seed + epoch)
        order = sorted(range(len(samples)), key=lambda i: (len(samples[i].input_ids), rng.random()))
        batches = [order[i: i + unit] for i in range(0, len(order), unit)]
        rng.shuffle(batches)
        rows += [i for b in batches for i in b]
    rows = rows[: int(len(samples) * epochs)]
    if step > batch_size:
        rows = [i for k in range(0, len(rows), step)
                for i in sorted(rows[k: k + step], key=lambda i: len(samples[i].input_ids))]
    return [rows[i: i + batch_size] for i in range(0, len(rows), batch_size)]


def run_rows(samples: list[Sample], cfg: SFTConfig, world: int, derived_batch: bool) -> list[list[int]]:
    """The run's micro-batches: each optimizer step's sequences (all processes' micro-batches)
    sorted by length and cut. A micro-batch the run derived from the device's memory
    (``derived_batch``) cuts steps of ``defaults.step_length_unit`` length groups (the step, or
    pairs at a small step), sizes the step alone sets: which sequences make a step, and so what is
    learned, never depends on the device's memory. A micro-batch the user gives groups by its step
    (at accumulation 1 on one process its own size, as before stop 56): processes sharing a step
    get rows of similar length, where the step waits for the slowest (``benchmarks/composition.py``)."""
    from trajforge.train.defaults import step_length_unit

    step = cfg.batch_size * cfg.grad_accum * world
    unit = step_length_unit(step) if derived_batch else step
    return epoch_rows(samples, cfg.epochs, cfg.batch_size, cfg.seed, unit=unit, step=step)


def sample_counts(rows: list[Sample]) -> dict[str, float]:
    return {"tokens": float(sum(sum(s.loss_mask[1:]) for s in rows))}


class LoaderBatches:
    """SFT's micro-batches through a data loader accelerate prepares: sharded round-robin across
    processes (micro-batch i goes to process i mod N, so N processes × k micro-batches see what one
    process sees in N·k), moved to the device, ``grad_accum`` of them per optimizer step."""

    def __init__(self, samples: list[Sample], micro: list[list[int]], pad: int, per_step: int):
        self.samples, self.micro, self.pad, self.per_step = samples, micro, pad, per_step
        self.it = None

    def steps(self, world: int) -> int:
        return math.ceil(len(self.micro) / (self.per_step * world))

    def _collate(self, rows: list[Sample]) -> dict[str, Any]:
        # cpu: built in the loader; accelerate's prepared loader moves each batch to the device.
        return {**collate(rows, self.pad, device="cpu"), "counts": sample_counts(rows)}

    def prepare(self, runtime: Runtime, start: int) -> None:
        import torch
        from torch.utils.data import DataLoader

        # Its own generator: a loader iterator draws a base seed, and drawing it from the global
        # RNG would shift dropout after a resume (the resumed run makes its iterator mid-run).
        loader = DataLoader(self.samples, batch_sampler=self.micro, collate_fn=self._collate,
                            generator=torch.Generator().manual_seed(0))
        loader = runtime.acc.prepare(loader)
        if start:
            loader = runtime.acc.skip_first_batches(loader, start * self.per_step)
        self.it = iter(loader)

    def for_step(self, step: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(self.per_step):
            nxt = next(self.it, None)
            if nxt is None:
                break
            out.append(nxt)
        return out


def render_rules(cfg: SFTConfig, demos: Demos | None = None) -> tuple:
    """The trajectory rewrites applied before rendering, in order: slimming (drops turns), the
    retrieved demonstrations (rewrite the first user message), canonical calls."""
    return (((slim_detours,) if cfg.slim else ())
            + ((DemoRule(demos, toolset_lookup()),) if demos is not None else ())
            + ((canonical_calls,) if cfg.canonical else ()))


def build_samples(data: list[Trajectory], tok, model: str, cfg: SFTConfig,
                  skipped: dict[str, int], demos: Demos | None = None) -> tuple[list[Sample], SequenceBuilder]:
    """The demonstrations as samples; those over ``max_len`` are skipped and counted. ``demos``:
    retrieved demonstrations shown in each first user message (train/demos.py)."""
    builder = SequenceBuilder(tok, training_dialect(data, model, tok, cfg.dialect), cfg.render_mode,
                              toolset_of=toolset_lookup(), rules=render_rules(cfg, demos), learn=turn_learns)
    built = [s for t in data for s in builder.build(t)]
    # A sample without a loss token (every turn in it masked: a recovered episode with no clean
    # turn, a failed turn in a sequence of its own) teaches nothing; it is counted, not trained.
    samples = [s for s in built if loss_tokens(s)]
    if len(samples) < len(built):
        skipped["no_loss"] = skipped.get("no_loss", 0) + len(built) - len(samples)
    kept = within(samples, cfg.max_len)
    if kept.too_long:
        skipped["too_long"] = skipped.get("too_long", 0) + len(kept.too_long)
        longest = max(len(samples[i].input_ids) for i in kept.too_long)
        log.warning("skipped %d of %d samples longer than --max-len %d tokens (longest %d); they are never "
                    "cut mid-conversation", len(kept.too_long), len(samples), cfg.max_len, longest)
    return [samples[i] for i in kept.kept], builder


def train_sft(trajs: list[Trajectory], model: str, out_dir: str | Path, cfg: SFTConfig | None = None,
              progress: bool = True, resume: bool = False,
              evaluator: InLoopEval | None = None, replay: list[Sample] | None = None,
              init_adapter: str | None = None) -> SFTResult:
    """Train an adapter on the successful trajectories; see the module docstring.

    ``init_adapter``: an adapter to go on from (merged into the base, a new adapter on top, its
    lineage recorded as DPO's is, so loading this one loads it first); None starts from the base.
    ``replay``: general-instruction samples (train/replay.py) mixed in at ``cfg.replay_share``;
    None self-distills them from the starting model (cached).
    ``resume`` continues from the last checkpoint in ``out_dir``; ``evaluator`` runs the in-loop
    evaluation every ``cfg.eval_every`` steps.
    """
    cfg = cfg or SFTConfig()
    started = time.perf_counter()
    data, skipped = select(trajs, cfg)
    if not data:
        raise ValueError(f"no trajectories of tiers {cfg.tiers} to train on (skipped: {skipped})")
    fingerprints = check_fingerprints(data)
    path = resolve(model)
    runtime = Runtime(cfg, host_allocator=False)
    net, tok = lora_model(path, cfg, init_adapter, device=str(runtime.device))
    cfg, derived = derive(cfg, model_params(path, net), len(data), runtime.world)
    for line in derived.why:
        log.info("derived: %s", line)
    if cfg.chat_template:
        settle_template(tok, read_chat_template(cfg.chat_template))
    shown = (sft_demos(data, cfg.demos, cfg.demo_pool, out_dir, runtime.is_main) if cfg.demos
             else inherited_demos(init_adapter, out_dir, runtime.is_main))
    samples, builder = build_samples(data, tok, model, cfg, skipped, shown.demos if shown else None)
    if not samples:
        raise ValueError(f"no sample fits --max-len {cfg.max_len} (skipped: {skipped})")
    turn = longest_turn(samples)  # of the task samples: replay's free text is no turn of a tool call
    if cfg.replay_share > 0:
        replay = replay if replay is not None else shared_replay(runtime, net, tok, path, init_adapter)
        samples += mix_replay(replay, len(samples), cfg.replay_share, cfg.seed)
    if cfg.batch_size is None:
        cfg = settle_batch(cfg, path, samples, runtime, derived)
    micro = run_rows(samples, cfg, runtime.world, derived.batch_size is not None)
    if cfg.gradient_checkpointing is None:
        cfg = settle_checkpointing(cfg, path, samples, micro, runtime, net, derived)
    if runtime.device.type == "cpu":
        settle_host_allocator(cfg, path, samples, micro, runtime, derived)
    batches = LoaderBatches(samples, micro, tok.pad_token_id, cfg.grad_accum)
    total = batches.steps(runtime.world)
    if total == 0:  # before anything is written: an adapter of no step is not a result
        raise ValueError(f"--epochs {cfg.epochs:g} of {len(samples)} samples makes no optimizer step")
    if cfg.max_steps > 0:
        total = min(total, cfg.max_steps)
    share = share_prefix(cfg, runtime)

    def loss_fn(model_, micro_, totals):
        s = model_(lm_loss_sum, micro_["input_ids"], micro_["attention_mask"], micro_["labels"], share)
        return s / max(1.0, totals["tokens"]), {}

    if isinstance(evaluator, InLoopEval):  # in-loop evaluation acts in the dialect and renderer trained
        evaluator.dialect = evaluator.dialect or builder.dialect
        evaluator.render_mode = cfg.render_mode
        if shown:  # and shows the demonstrations trained with, from the adapter's copy of the pool
            evaluator.harness = evaluator.harness.model_copy(update={"demos": shown.meta["k"],
                                                                     "demo_pool": shown.file})
    hook = evaluator.hook(net, tok) if evaluator else None
    fitted = fit(net, total, batches, loss_fn, cfg, out_dir, "sft", progress, resume, hook, runtime)
    ran = len(fitted.losses) + fitted.skipped_nonfinite  # all steps taken (a time budget may stop early)
    used = [samples[i] for rows in micro[: ran * cfg.grad_accum * runtime.world] for i in rows]
    result = SFTResult(
        adapter_dir=str(out_dir), samples=len(samples), skipped=skipped,
        tokens=sum(len(s.input_ids) for s in used), loss_tokens=sum(sum(s.loss_mask) for s in used),
        steps=len(fitted.losses), losses=fitted.losses, seconds=time.perf_counter() - started,
        skipped_nonfinite=fitted.skipped_nonfinite, resumed_from=fitted.resumed_from, stopped=fitted.stopped,
        peak_memory_gb=fitted.peak_memory_gb, built=dict(builder.counts), lr=cfg.lr,
        effective_batch=cfg.batch_size * cfg.grad_accum * runtime.world)
    if runtime.is_main:
        from trajforge.train.adapter import lineage_ref, save_adapter

        save_adapter(runtime.acc.unwrap_model(net), tok, out_dir, {
            "recipe": "sft", **fingerprint_meta(data, fingerprints), "dialect": builder.dialect.name,
            "render_mode": cfg.render_mode, **({"demos": shown.meta} if shown else {}),
            "base_model": model, "init_adapter": lineage_ref(init_adapter), "longest_turn": turn,
            "config": cfg.model_dump(),
            "derived": derived.model_dump(), "result": result.model_dump(exclude={"losses"})})
    runtime.barrier()
    return result


def shared_replay(runtime: Runtime, net, tok, path: str, init_adapter: str | None = None) -> list[Sample]:
    """Self-distilled replay samples of the starting model (train/replay.py), made once: the main
    process generates and caches them, the others read the cache."""
    from trajforge.train.replay import starting_model_replay

    if not runtime.is_main:
        runtime.barrier()
    samples = starting_model_replay(net, tok, path, init_adapter)
    if runtime.is_main:
        runtime.barrier()
    return samples


def settle_checkpointing(cfg: SFTConfig, path: str, samples: list[Sample], micro: list[list[int]],
                         runtime: Runtime, net, derived) -> SFTConfig:
    """``gradient_checkpointing`` None made concrete by ``defaults.auto_checkpointing`` for this
    run's micro-batches on this device (the main process decides for all), turned on in ``net``
    when on (``lora_model`` left it off), and recorded in ``derived``."""
    from trajforge.train.model import enable_checkpointing

    shape = shape_or_none(path)
    work = run_workloads(samples, micro, cfg, runtime.world)
    sharded = runtime.acc.distributed_type.name
    if sharded in ("DEEPSPEED", "FSDP"):  # also under a user's own accelerate config, whatever --distributed says
        on, why = True, f"gradient checkpointing on: {sharded} shards the model (the plan is unchecked there)"
    else:
        on, why = auto_checkpointing(cfg, shape, work, runtime.device.type, device_memory_bytes(runtime),
                                     runtime.world)
    on = runtime.decide(on)
    log.info("derived: %s", why)
    derived.gradient_checkpointing = on
    derived.why.append(why)
    if on:
        enable_checkpointing(net)
    return cfg.model_copy(update={"gradient_checkpointing": on})


def run_workloads(samples: list[Sample], micro: list[list[int]], cfg: SFTConfig, world: int) -> list:
    """The distinct micro-batch shapes (plan.Workload) the run meets: with ``max_steps`` only its
    first micro-batches (as ``trajforge plan`` assumes)."""
    from trajforge.train.plan_data import data_workloads

    if cfg.max_steps > 0:
        micro = micro[: cfg.max_steps * cfg.grad_accum * world]
    return data_workloads(samples, micro)


def settle_host_allocator(cfg: SFTConfig, path: str, samples: list[Sample], micro: list[list[int]],
                          runtime: Runtime, derived) -> None:
    """On a CPU, the host allocator for this run (``defaults.auto_host_allocator``) unless it is
    already settled (``$TRAJFORGE_MMAP_THRESHOLD``, an earlier run, the demo): glibc's fast dynamic
    threshold where three times the plan's peak fits, memory given back otherwise and without a plan."""
    from trajforge.train.defaults import auto_host_allocator, planned_peak_gb
    from trajforge.train.host_memory import keep_glibc_threshold, return_freed_blocks, threshold_decided

    shape = None if threshold_decided() else shape_or_none(path)  # settled already: no plan needed
    if shape is None:
        return_freed_blocks()
        return
    memory = device_memory_bytes(runtime)
    peak = planned_peak_gb(cfg, shape, run_workloads(samples, micro, cfg, runtime.world), "cpu", memory,
                           runtime.world, bool(cfg.gradient_checkpointing))
    keep, why = auto_host_allocator(peak, memory)
    keep = runtime.decide(keep)
    log.info("derived: %s", why)
    derived.why.append(why)
    keep_glibc_threshold() if keep else return_freed_blocks()


def settle_batch(cfg: SFTConfig, path: str, samples: list[Sample], runtime: Runtime, derived) -> SFTConfig:
    """``batch_size`` None (and ``grad_accum`` None) made concrete by ``defaults.settle_micro_batch``
    for this run's samples on this device; the main process decides for all."""
    from trajforge.train.defaults import accumulation, settle_micro_batch

    world = runtime.world
    target = derived.effective_batch

    def workloads_for(m: int):  # the micro-batches this run would meet at micro-batch m
        at = cfg.model_copy(update={"batch_size": m, "grad_accum": accumulation(target, m, world)})
        return run_workloads(samples, run_rows(samples, at, world, derived_batch=True), at, world)

    # Under a user's own DeepSpeed or FSDP config no plan sizes the micro-batch (as for checkpointing).
    sharded = runtime.acc.distributed_type.name in ("DEEPSPEED", "FSDP")
    settled = settle_micro_batch(cfg, derived, None if sharded else shape_or_none(path), workloads_for,
                                 runtime.device.type, device_memory_bytes(runtime), world)
    m = runtime.decide(settled.batch_size)
    if m != settled.batch_size:  # another process's device decided: its accumulation too
        accum = accumulation(target, m, world)
        derived.batch_size, derived.grad_accum, derived.effective_batch = m, accum, m * accum * world
        settled = settled.model_copy(update={"batch_size": m, "grad_accum": accum})
    log.info("derived: %s", derived.why[-1])
    return settled


def shape_or_none(path: str):
    """The model's ``shapes.Shape``, None when its shape is unknown (no plan then)."""
    from trajforge.train.shapes import model_shape

    try:
        return model_shape(path)
    except ValueError:
        return None


def device_memory_bytes(runtime: Runtime) -> float:
    """Memory one process may plan for: what its GPU has free plus what this process already holds
    there (another process on the card — a vLLM server — keeps its share), or this host's memory
    shared by its processes (inf: unknown)."""
    device = runtime.device
    if device.type == "cuda":
        import torch

        free, _ = torch.cuda.mem_get_info(device)
        return float(free + torch.cuda.memory_reserved(device))
    if device.type == "cpu":
        from trajforge.train.plan import host_share_bytes

        return host_share_bytes(runtime.world)
    return math.inf


def share_prefix(cfg: LoraSettings, runtime: Runtime) -> bool:
    """Whether the shared-prefix cache runs, logging why not when it was asked for."""
    if not cfg.share_prefix:
        return False
    if cfg.gradient_checkpointing:
        log.info("shared-prefix cache off: gradient checkpointing recomputes layers and cannot hold a KV cache")
        return False
    if runtime.acc.distributed_type.name in ("DEEPSPEED", "FSDP"):
        log.info("shared-prefix cache off under %s: sharded parameters are gathered per forward call",
                 runtime.acc.distributed_type.name)
        return False
    return True


__all__ = ["IGNORE", "SFTConfig", "SFTResult", "select", "train_sft"]


# Names this module imported in 0.1 (deprecated; see trajforge/_compat.py).
from trajforge._compat import moved_names  # noqa: E402

__getattr__ = moved_names(__name__, {
    "env_class": "trajforge.envs",
    "masked_lm_loss": "trajforge.train.losses",
    "render_sample": "trajforge.train.data",
    "save_adapter": "trajforge.train.adapter",
})
