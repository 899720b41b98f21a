"""Defaults that learn: SFT's learning rate, passes and optimizer-step batch, derived from the model's
size and the amount of data when the user sets none of them.

One fixed learning rate and batch cannot serve both a 135M model on 180 demonstrations and a 7B
model on 5,000: the seeds' 7B LoRA values (lr 2e-4, effective batch 32) barely move a 135M model in
the ~100 steps its data gives (the demo measured 10% held-out with them, 67% with lr 1e-3 and batch
4), and a 135M model's values would be unstable on a 7B one. The rule:

- **Learning rate** ``2e-4 × sqrt(7e9 / params)``, clipped to [1e-4, 1e-3]. The square-root
  scaling follows the practice of lowering the rate as models grow (hidden size grows roughly with
  the square root of the parameter count, and μP-style rules scale the rate by 1/hidden). It gives
  the seeds' 2e-4 at 7B, ~7.5e-4 at 0.5B, 1e-3 (the cap) at 135M and 1.4e-4 at 14B. The rate is
  set for LoRA at ``alpha = 2r``. At other alpha/r ratios the same rate moves the weights
  proportionally more or less.
- **Epochs**: the fewest whole passes that give ``MIN_STEPS`` optimizer steps at the smallest batch
  (``MIN_BATCH``), at most ``MAX_EPOCHS``: one pass once the data holds ``MIN_STEPS × MIN_BATCH``
  sequences, more for a small store. On the embedded model the steps decide what is learned, not
  the passes: 182 demonstrations at 1.0 epoch (45 steps) reached 38% held-out and at 1.75 epochs
  64%. The demo's 603 get one pass at batch 4 (151 steps), the demo's own recipe; with this rule
  and no flags they reach 90.9% of the 186 held-out tasks against the demo's 88.2% (README,
  "Defaults that learn"); one pass already reaches a loss of 0.004 there, and two passes (with
  replay) did no better than one.
- **Effective batch** (sequences per optimizer step): the largest power of two ≤ 32 that still
  leaves at least ``MIN_STEPS`` optimizer steps over the run (demonstrations plus their replay
  share, times the epochs), never below 4. A few thousand demonstrations get the seeds' 32. A small
  store gets smaller batches rather than a run of a dozen updates that warm-up and cosine decay
  would consume. ``grad_accum`` is what reaches that batch at the configured per-device
  ``batch_size`` and process count.

- **Micro-batch** (``auto_micro_batch``, when neither ``batch_size`` nor ``grad_accum`` is given):
  the largest power of two up to one process's share of the effective batch whose planned peak
  (``trajforge plan``'s, for the run's own micro-batches at that size) fits ``CHECKPOINT_HEADROOM``
  of the device's memory without checkpointing; if none does, the largest that fits with it.
  Accumulation makes up the rest of the effective batch, and the steps are composed without
  looking at the micro-batch (``sft.run_rows``: one length group a step, ``step_length_unit``;
  random pairs at a step of 4 or less), so the learning is the same and only the
  cost differs: a larger micro-batch shares its prompt prefix among more rows (train/losses.py)
  and fills the device: one 4-sequence step of the demo's pool took 12.2 s as 2 × 2 and 8.3 s as
  the derived 4 × 1 (``benchmarks/sft_settings.py --arms no-ckpt@0,auto@0``, stop 55). (A first
  version let the micro-batch also set the length groups: 4 similar-length sequences a step
  instead of two random pairs, 156 of the 186 held-out tasks against the pairs' 168 — no more than
  the pairs' own seed-to-seed spread, 157 on seed 1, but what was learned then hung on the
  device's memory.) Without a plan (unknown model shape, MPS, a sharded launch whose
  DeepSpeed config is written first) or with ``grad_accum`` given, it is ``MICRO_BATCH_FALLBACK``.
- **Gradient checkpointing** (``auto_checkpointing``): off when ``trajforge plan``'s peak for the
  run's widest micro-batch without it stays within ``CHECKPOINT_HEADROOM`` of the device's memory
  (a GPU's free memory plus what the run holds there, or this host's shared by its processes;
  ``trajforge plan`` takes ``--gpu-gb``), on otherwise — and always on for a
  quantized base and under DeepSpeed or FSDP, where the plan is not checked against measured
  peaks and memory is why those were chosen. Recomputing every layer in the backward pass is pure
  cost when the activations fit, and more than the ~30% usually quoted here: it also turns off the
  shared-prefix cache. On the demo's pool (``benchmarks/sft_settings.py``) a step took 16.3 s with
  it and 8.1 s without (the plan: 3.3 GB peak without it, of this host's 25.3 GB).

- **Host allocator** (CPU, ``auto_host_allocator``, unless ``TRAJFORGE_MMAP_THRESHOLD`` is set):
  glibc's dynamic mmap threshold, the faster one, where ``GLIBC_RETENTION`` times the plan's peak
  fits ``CHECKPOINT_HEADROOM`` of the process's share of the host; a fixed 1 MiB threshold that
  gives freed activations back otherwise (train/host_memory.py).

A flag or config value always wins: the rule fills only what is left as None, and the adapter's
meta records the values used and why.
"""

from __future__ import annotations

import math

from pydantic import BaseModel

REFERENCE_PARAMS = 7e9
REFERENCE_LR = 2e-4
LR_RANGE = (1e-4, 1e-3)
TARGET_BATCH = 32
MIN_BATCH = 4
MIN_STEPS = 100
"""An adapter needs on the order of a hundred updates: below that the warm-up and the cosine decay
are most of the run."""
CHECKPOINT_HEADROOM = 0.8
"""Share of the device's memory a run without checkpointing may be planned to peak at. The plan is
within 5% of measured peaks on this CPU and 0.4% on an H200 (README, "Memory and time"); the rest
is for what the plan does not see (other tensors, fragmentation)."""
MICRO_BATCH_FALLBACK = 2
"""The micro-batch where no plan sizes one: a model of unknown shape, a device the plan has no
budget for (MPS), a sharded run (its DeepSpeed config is written before its processes see their
devices), or a run whose ``grad_accum`` was given (the effective batch is then the user's)."""
PAIRED_STEP = 4
"""Steps of at most this many sequences keep random length pairs (``step_length_unit``): at 4
(what the demo's pool derives) the pairs learnt 169 and 157 of the 186 held-out tasks on seeds 0
and 1 and one group of 4 156 on seed 0 (stop 55), while their costs differ by 3% (0.56 and 0.54
positions run per token, ``benchmarks/composition.py``): nothing measured favours changing them."""
GLIBC_RETENTION = 3.0
"""How far above the plan's peak a CPU run's resident set may climb under glibc's dynamic mmap
threshold (freed activations stay in the heap). Measured: 2.2× (stop 55's no-flag run, 11.0 GB
against the plan's 5.1), 2.5× (stop 54's, 8.3 against 3.3), 2.7× (``benchmarks/host_memory.py``).
Since stop 56 the plan counts CPU dropout's fp32 noise (``plan.layer_bytes_per_token``) and puts
stop 55's run at 5.8 GB: 1.9× of that. The factor was left at 3.0 (the safe side); the demo's
pool still keeps glibc's threshold on this 25.3 GB host (3 × 5.8 GB within 80%), narrowly."""
MAX_EPOCHS = 3
"""Passes a tiny store may get to reach ``MIN_STEPS``; more memorise it (doctor names 4 passes over
fewer than 500 samples as memorising)."""


class Derived(BaseModel):
    """What the rule chose and from what; stored in the adapter's meta as ``derived``."""

    lr: float | None = None
    epochs: int | None = None
    effective_batch: int | None = None
    batch_size: int | None = None
    grad_accum: int | None = None
    gradient_checkpointing: bool | None = None
    params: int
    sequences_per_epoch: int
    why: list[str] = []


def auto_lr(params: int) -> float:
    lo, hi = LR_RANGE
    return float(min(hi, max(lo, REFERENCE_LR * math.sqrt(REFERENCE_PARAMS / max(1, params)))))


def auto_batch(sequences: float) -> int:
    """Largest power of two in [MIN_BATCH, TARGET_BATCH] with ``sequences / batch >= MIN_STEPS``."""
    batch = TARGET_BATCH
    while batch > MIN_BATCH and sequences / batch < MIN_STEPS:
        batch //= 2
    return batch


def auto_epochs(sequences: int) -> int:
    """Fewest whole passes with ``sequences × passes / MIN_BATCH >= MIN_STEPS``, in [1, MAX_EPOCHS]."""
    return int(min(MAX_EPOCHS, max(1, math.ceil(MIN_STEPS * MIN_BATCH / max(1, sequences)))))


def sequences_per_epoch(demonstrations: int, replay_share: float) -> int:
    """Demonstrations plus the replay samples mixed in at ``replay_share`` (train/replay.mix_replay)."""
    replay = round(demonstrations * replay_share / (1 - replay_share)) if 0 < replay_share < 1 else 0
    return demonstrations + replay


def derive(cfg, params: int, demonstrations: int, world: int = 1):
    """``cfg`` with ``lr``, ``epochs`` and ``grad_accum`` filled in where they are None, and the record
    of why. A ``batch_size`` left None as well keeps both None here, the effective batch recorded:
    the micro-batch needs the run's samples and the device's memory (``settle_micro_batch``).

    ``cfg``: an SFTConfig (any config with ``lr``, ``grad_accum``, ``batch_size``, ``epochs`` and
    ``replay_share``). ``params``: the base model's parameter count. ``demonstrations``: the
    trajectories selected for training. ``world``: processes sharing each optimizer step.
    """
    seqs = sequences_per_epoch(demonstrations, cfg.replay_share)
    record = Derived(params=params, sequences_per_epoch=seqs)
    update = {}
    if cfg.lr is None:
        update["lr"] = record.lr = auto_lr(params)
        record.why.append(f"lr {record.lr:.2g} = 2e-4 × sqrt(7e9 / {params:,} params), clipped to "
                          f"[{LR_RANGE[0]:g}, {LR_RANGE[1]:g}]")
    if cfg.epochs is None:
        update["epochs"] = record.epochs = auto_epochs(seqs)
        record.why.append(f"epochs {record.epochs}: fewest passes over {seqs} sequences giving ≥ {MIN_STEPS} "
                          f"steps at batch {MIN_BATCH}, at most {MAX_EPOCHS}")
    epochs = update.get("epochs", cfg.epochs)
    if cfg.batch_size is None and cfg.grad_accum is not None:
        update["batch_size"] = record.batch_size = MICRO_BATCH_FALLBACK
        record.why.append(f"micro-batch {MICRO_BATCH_FALLBACK}: --grad-accum {cfg.grad_accum} was given, so the "
                          f"effective batch is yours")
    if cfg.grad_accum is None:
        target = auto_batch(seqs * epochs)
        reason = (f"(target {target}: largest power of two ≤ {TARGET_BATCH} leaving ≥ {MIN_STEPS} steps over "
                  f"{seqs} sequences × {epochs:g} epochs)")
        if cfg.batch_size is None:  # the micro-batch and its accumulation are settled against the
            # device's memory once the run's samples exist (settle_micro_batch)
            record.effective_batch = target
            record.why.append(f"effective batch {target} {reason}")
        else:
            per_pass = cfg.batch_size * world
            update["grad_accum"] = record.grad_accum = accumulation(target, cfg.batch_size, world)
            record.effective_batch = record.grad_accum * per_pass
            record.why.append(f"effective batch {record.effective_batch} {reason} = batch {cfg.batch_size} × "
                              f"{world} process(es) × grad_accum {record.grad_accum}")
    return cfg.model_copy(update=update), record


NO_PLAN = "gradient checkpointing on: no memory plan for this model or device"


def forced_checkpointing(cfg, shape, device: str, memory_bytes: float, processes: int = 1) -> str | None:
    """Why checkpointing is on whatever the plan says (a quantized base, a sharded run, no plan for
    this model or device), else None."""
    if cfg.load_in != "none":
        return f"gradient checkpointing on: a {cfg.load_in} base is loaded to save memory"
    if processes > 1 and cfg.distributed != "ddp":
        return f"gradient checkpointing on: --distributed {cfg.distributed} (sharded; the plan is unchecked there)"
    if shape is None or device not in ("cpu", "cuda") or not math.isfinite(memory_bytes):
        return NO_PLAN
    return None


def planned_peak_gb(cfg, shape, workloads: list, device: str, memory_bytes: float, processes: int,
                    checkpointing: bool) -> float:
    """``plan.train_memory``'s peak (GB) for the widest of ``workloads`` with checkpointing on or off."""
    from trajforge.train.plan import GB, Hardware, peak_workload, train_memory

    cfg = cfg.model_copy(update={"gradient_checkpointing": checkpointing})
    hw = Hardware(device=device, gpus=processes if device == "cuda" else 1, gpu_gb=memory_bytes / GB)
    return train_memory(shape, cfg, hw, peak_workload(shape, cfg, hw, workloads)).total_gb


def auto_checkpointing(cfg, shape, workloads: list, device: str, memory_bytes: float, processes: int = 1
                       ) -> tuple[bool, str]:
    """(checkpointing on?, why) for ``cfg`` with ``gradient_checkpointing`` None: on unless the plan's
    peak without it (``plan.train_memory`` for the widest of ``workloads``, plan.Workload) fits
    ``CHECKPOINT_HEADROOM × memory_bytes`` (one device's memory: a GPU's, or the host's share of one
    of its ``processes``). ``shape``: the model's ``shapes.Shape``, None when unknown (then on)."""
    from trajforge.train.plan import GB

    forced = forced_checkpointing(cfg, shape, device, memory_bytes, processes) if workloads else NO_PLAN
    if forced:
        return True, forced
    peak = planned_peak_gb(cfg, shape, workloads, device, memory_bytes, processes, checkpointing=False)
    fits = peak <= CHECKPOINT_HEADROOM * memory_bytes / GB
    return not fits, (f"gradient checkpointing {'off' if fits else 'on'}: the plan's peak without it is "
                      f"{peak:.1f} GB, {'within' if fits else 'over'} {CHECKPOINT_HEADROOM:.0%} of the "
                      f"{memory_bytes / GB:.1f} GB of one {device} process")


def auto_micro_batch(cfg, shape, workloads_for, device: str, memory_bytes: float, processes: int,
                     per_process: int) -> tuple[int, str]:
    """(micro-batch, why): the largest power of two ≤ ``per_process`` (the effective batch's share
    of one process) whose planned peak fits ``CHECKPOINT_HEADROOM`` of one device's memory —
    without checkpointing if any does (when ``cfg`` leaves it to derive), else with it.
    ``workloads_for(m)``: the run's micro-batch shapes at micro-batch ``m`` (plan.Workload)."""
    from trajforge.train.plan import GB

    candidates = [1 << k for k in range(max(0, per_process).bit_length() - 1, -1, -1)] or [1]
    forced = forced_checkpointing(cfg, shape, device, memory_bytes, processes)
    if forced == NO_PLAN:
        m = min(MICRO_BATCH_FALLBACK, candidates[0])
        return m, f"micro-batch {m}: no memory plan for this model or device"
    if cfg.gradient_checkpointing is not None:
        modes = [cfg.gradient_checkpointing]
    else:
        modes = [True] if forced else [False, True]
    budget = CHECKPOINT_HEADROOM * memory_bytes / GB
    for checkpointing in modes:
        for m in candidates:
            peak = planned_peak_gb(cfg, shape, workloads_for(m), device, memory_bytes, processes, checkpointing)
            if peak <= budget:
                return m, (f"micro-batch {m}: the largest power of two ≤ {candidates[0]} whose planned peak "
                           f"{'with' if checkpointing else 'without'} checkpointing ({peak:.1f} GB) fits "
                           f"{CHECKPOINT_HEADROOM:.0%} of the {memory_bytes / GB:.1f} GB of one {device} process")
    peak = planned_peak_gb(cfg, shape, workloads_for(1), device, memory_bytes, processes, modes[-1])
    return 1, (f"micro-batch 1: even one sequence {'with' if modes[-1] else 'without'} checkpointing is planned "
               f"at {peak:.1f} GB, over {CHECKPOINT_HEADROOM:.0%} of the {memory_bytes / GB:.1f} GB of one "
               f"{device} process")


def step_length_unit(step: int) -> int:
    """Sequences of one length group in a derived micro-batch's run (``sft.run_rows``): the whole
    optimizer step (all processes' micro-batches together), or pairs (``MICRO_BATCH_FALLBACK``)
    for a step of at most ``PAIRED_STEP`` sequences. A step of one length group is what
    transformers' ``group_by_length`` samples (its groups are a process's micro-batch ×
    accumulation): whatever the device makes of it, every micro-batch is cut from similar lengths,
    and processes get micro-batches of similar cost, where the step waits for the slowest.
    ``benchmarks/composition.py --build`` (stop 56), a four-environment pool of 548 expert
    sequences of 537–4,075 tokens, 32-sequence steps: positions run per token of data (padding in,
    shared prefixes once) at micro-batches 4 / 8 / 16 / 32 were 0.86 / 1.09 / 1.51 / 2.22 with the
    random pairs of stop 55, 0.72 / 0.74 / 0.82 / 1.04 with one group a step; on 2, 4 or 8
    processes at accumulation 1, 2.23 / 2.13 / 2.03 against 1.02 each."""
    return step if step > PAIRED_STEP else MICRO_BATCH_FALLBACK


def accumulation(effective_batch: int, micro_batch: int, processes: int = 1) -> int:
    """Micro-batches per optimizer step that reach ``effective_batch`` (at least 1)."""
    return max(1, round(effective_batch / (micro_batch * processes)))


def settle_micro_batch(cfg, derived: Derived, shape, workloads_for, device: str, memory_bytes: float,
                       processes: int = 1):
    """``cfg`` with ``batch_size`` (None: derived) and the ``grad_accum`` that reaches the derived
    effective batch made concrete by ``auto_micro_batch``; recorded in ``derived``."""
    target = derived.effective_batch or TARGET_BATCH
    per_process = max(1, target // processes)
    m, why = auto_micro_batch(cfg, shape, workloads_for, device, memory_bytes, processes, per_process)
    accum = accumulation(target, m, processes)
    derived.batch_size, derived.grad_accum, derived.effective_batch = m, accum, m * accum * processes
    derived.why.append(f"{why}; × grad_accum {accum} × {processes} process(es) = effective batch "
                       f"{derived.effective_batch}")
    return cfg.model_copy(update={"batch_size": m, "grad_accum": accum})


def auto_host_allocator(peak_gb: float, memory_bytes: float) -> tuple[bool, str]:
    """(keep glibc's dynamic mmap threshold?, why) for a CPU run the plan puts at ``peak_gb``: kept
    (faster steps) when ``GLIBC_RETENTION`` times the peak still fits ``CHECKPOINT_HEADROOM`` of the
    process's share of the host, else fixed at ``host_memory.MMAP_THRESHOLD`` (memory given back)."""
    from trajforge.train.plan import GB

    keep = GLIBC_RETENTION * peak_gb <= CHECKPOINT_HEADROOM * memory_bytes / GB
    return keep, (f"host allocator: glibc's dynamic mmap threshold {'kept' if keep else 'fixed at 1 MiB'}: "
                  f"{GLIBC_RETENTION:g} × the plan's {peak_gb:.1f} GB is {'within' if keep else 'over'} "
                  f"{CHECKPOINT_HEADROOM:.0%} of the {memory_bytes / GB:.1f} GB of one cpu process")


def model_params(model: str, net=None) -> int:
    """The base model's parameter count: from its shape (config.json or a known name), else by
    counting the loaded model's non-adapter parameters."""
    from trajforge.train.shapes import model_shape

    try:
        return model_shape(model).params().total
    except ValueError:
        if net is None:
            raise
        return sum(p.numel() for n, p in net.named_parameters() if "lora_" not in n)
