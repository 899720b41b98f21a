"""The optimisation loop every recipe shares, on ``accelerate``: devices, processes, accumulation.

SFT, DPO and GRPO differ only in how a step's micro-batches are made and what a micro-batch's
loss is; the rest lives here once:

- ``Runtime`` wraps one ``accelerate.Accelerator``: it picks the device (``policies.devices``),
  bf16 autocast where the base computes in bf16, the process group when launched with several
  processes (``accelerate launch`` / ``torchrun``; gloo on CPUs), and DeepSpeed ZeRO-2/3 or FSDP
  through ``train/distributed.py``.
- ``fit`` runs AdamW with warm-up + cosine decay for ``total`` optimizer steps. Each step takes
  this process's micro-batches from ``batches.for_step(step)``; gradients accumulate over them
  inside ``accelerator.accumulate`` (which skips the DDP all-reduce until the last one) and are
  clipped with ``accelerator.clip_grad_norm_``.
- Exact accumulation: a micro-batch's loss is a *sum* (over tokens, pairs, ...) divided by the
  count summed over every micro-batch of the step on every process (``Runtime.sum``), times the
  number of processes (DDP averages gradients). So k micro-batches equal one batch k times
  larger, and N processes equal one (tests check both).
- The model is called through ``objective(net)``, the module accelerate wraps: under DDP the forward
  goes through the wrapper, so the reducer sees every pass — the shared-prefix path included.
- A NaN/Inf guard: a step whose loss or gradient norm is not finite is skipped on every process
  (gradients dropped, optimizer and schedule untouched) and counted.
- Main process only: curves, the progress bar, in-loop evaluation, checkpoints' adapter and
  optimizer files, the final adapter. The time budget is decided on the main process and
  broadcast, so processes never stop on different steps.
- Checkpoints (``train/checkpoint.py``) are safetensors + JSON; ``resume=True`` continues from
  the latest one and reproduces an uninterrupted run. A checkpoint records the run's plan (steps,
  processes, settings) and a resume planned otherwise is refused (``RESUMABLE_CHANGES`` may differ).
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any, Callable, Protocol

from pydantic import BaseModel

from trajforge.train.checkpoint import CHECKPOINTS, Checkpointer
from trajforge.train.curves import Curves
from trajforge.train.settings import LoraSettings

log = logging.getLogger(__name__)


class FitResult(BaseModel):
    losses: list[float]
    """Loss per completed step (skipped steps excluded)."""
    skipped_nonfinite: int = 0
    """Steps dropped by the NaN/Inf guard."""
    resumed_from: int = 0
    """Step the run continued from (0: a fresh start)."""
    stopped: str | None = None
    """Why the run ended before ``total`` steps (``time budget``), else None."""
    peak_memory_gb: float = 0.0
    """Highest memory of this process during training: CUDA max allocated on a GPU, the peak
    resident set on a CPU (GB = 10^9 bytes)."""


class Runtime:
    """The accelerate side of one run: device, processes, precision, collectives."""

    def __init__(self, cfg: LoraSettings, host_allocator: bool = True):
        """``host_allocator`` False: the recipe sets the CPU allocator itself once it has planned
        its memory (SFT: ``sft.settle_host_allocator``)."""
        from trajforge.train.distributed import make_accelerator

        self.acc = make_accelerator(cfg)
        self.cfg = cfg
        if self.acc.device.type == "cpu" and host_allocator:
            # Activations then go back to the kernel when freed: no high-water marks of every
            # batch shape seen (train/host_memory.py, benchmarks/host_memory.py).
            from trajforge.train.host_memory import return_freed_blocks

            return_freed_blocks()
        self.last_micro: Any = None
        """The previous micro-batch (a process with none in a step replays it with weight 0)."""

    @property
    def device(self):
        return self.acc.device

    @property
    def world(self) -> int:
        return self.acc.num_processes

    @property
    def rank(self) -> int:
        return self.acc.process_index

    @property
    def is_main(self) -> bool:
        return self.acc.is_main_process

    def barrier(self) -> None:
        if self.world > 1:
            self.acc.wait_for_everyone()

    def sum(self, values: dict[str, float]) -> dict[str, float]:
        """Each key summed over all processes (every process must pass the same keys)."""
        if self.world == 1:
            return dict(values)
        import torch

        keys = sorted(values)
        t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=self.device)
        t = self.acc.reduce(t, reduction="sum")
        return dict(zip(keys, t.tolist()))

    def decide(self, value):
        """The main process's ``value`` (a bool or an int), the same on every process."""
        if self.world == 1:
            return value
        import torch
        from accelerate.utils import broadcast

        t = torch.tensor([int(value)], device=self.device)
        return type(value)(broadcast(t, from_process=0).item())

    def gather_floats(self, values: list[float]) -> list[float]:
        """Every process's ``values``, concatenated in process order (lengths may differ)."""
        if self.world == 1:
            return list(values)
        import torch

        t = torch.tensor([len(values), *values], dtype=torch.float64, device=self.device)
        t = self.acc.pad_across_processes(t, dim=0, pad_index=0)
        rows = self.acc.gather(t.unsqueeze(0)).tolist()
        return [v for row in rows for v in row[1:1 + int(row[0])]]


def objective(net):
    """The module accelerate prepares: calling it runs ``fn(model, *args)`` inside its forward, so
    DDP/FSDP/DeepSpeed see the pass through their wrapper whatever ``fn`` calls inside (the
    decoder, the chunked head, a shared-prefix cache)."""
    import torch

    class Objective(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.net = inner

        def forward(self, fn, *args, **kwargs):
            return fn(self.net, *args, **kwargs)

    return Objective(net)


Micro = dict
"""One micro-batch: tensors plus ``counts`` — what its loss sums over (tokens, pairs, ...)."""


class StepBatches(Protocol):
    def prepare(self, runtime: Runtime, start: int) -> None:
        """Called once before the first step (``start`` > 0 on resume)."""

    def for_step(self, step: int) -> list[Any]:
        """This process's micro-batches for optimizer step ``step``."""

    # Optional, for batches made from state of their own (GRPO's task draws and curriculum):
    # ``checkpoint_state(step) -> dict`` (JSON) is stored with a checkpoint of the run before
    # ``step``; ``restore(state)`` gets it back on resume, before ``prepare``.


class CallBatches:
    """Micro-batches from a function of the step (rollouts, pairs, anything made on the fly)."""

    def __init__(self, fn: Callable[[int], list[Any]]):
        self.fn = fn

    def prepare(self, runtime: Runtime, start: int) -> None:
        pass

    def for_step(self, step: int) -> list[Any]:
        return self.fn(step)


LossFn = Callable[[Any, Any, dict[str, float]], tuple[Any, dict[str, Any]]]
"""``loss_fn(model, micro, totals)`` → (loss already divided by the step's totals, stats)."""


def schedule(opt, total: int):
    """Linear warm-up over the first 5% of steps, then cosine decay to 0 (none for short runs:
    the first warm-up step would have learning rate 0)."""
    from torch.optim.lr_scheduler import LambdaLR

    warm = total // 20

    def factor(step: int) -> float:
        if step < warm:
            return step / max(1, warm)
        progress = (step - warm) / max(1, total - warm)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    return LambdaLR(opt, factor)


def fit(net, total: int, batches: StepBatches, loss_fn: LossFn, cfg: LoraSettings, out_dir: str | Path,
        name: str = "train", progress: bool = True, resume: bool = False,
        on_step: Callable[[int], dict | None] | None = None, runtime: Runtime | None = None) -> FitResult:
    """Optimise ``net``'s trainable parameters for ``total`` steps; see the module docstring.

    ``loss_fn(model, micro, totals)`` gets the prepared ``objective`` as ``model``; it calls
    ``model(fn, ...)`` for every pass that needs gradients. ``on_step(step)`` runs on the main
    process after each completed step (1-based) and may return metrics to log (in-loop eval).
    """
    import torch

    from trajforge.harness.progress import progress_bar

    rt = runtime or Runtime(cfg)
    out = Path(out_dir)
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    sched = schedule(opt, max(1, total))
    model, opt, sched = rt.acc.prepare(objective(net), opt, sched)
    ckpt = Checkpointer(out / CHECKPOINTS, keep=cfg.keep_checkpoints, runtime=rt)
    start, result = 0, FitResult(losses=[])
    plan = run_plan(cfg, total, rt.world)
    latest = ckpt.latest() if resume else None
    if latest is not None:
        check_plan(ckpt.state(latest), plan, latest)
        state = ckpt.load(latest, net, opt)
        start, result = state["step"], FitResult(**state["result"])
        restore_batches(batches, state, latest)
        result.resumed_from = start
        # The schedule advances only on steps taken: a step the NaN guard dropped left it where it was.
        for _ in range(start - result.skipped_nonfinite):
            sched.step()
    batches.prepare(rt, start)
    curves = Curves(out, name, append=start > 0, upto=start) if rt.is_main else None
    memory = PeakMemory(rt.device)
    net.train()
    began = time.perf_counter()
    with progress_bar(name, total - start, progress and rt.is_main) as advance:
        for step in range(start, total):
            if rt.decide(out_of_time(began, step - start, cfg.max_seconds)):
                if cfg.checkpoint_every and step % cfg.checkpoint_every:
                    # A resume (with a larger budget) goes on from here, not from the last
                    # periodic checkpoint: the steps since it are not trained twice.
                    ckpt.save(step, net, opt, saved_state(result, plan, batches, step))
                result.stopped = "time budget"
                if curves:
                    curves.log(step, stopped_for_time=1)
                break
            loss, stats = accumulate_step(rt, model, batches.for_step(step), loss_fn)
            norm = rt.acc.clip_grad_norm_(params, 1.0)
            finite = rt.decide(bool(math.isfinite(loss) and torch.isfinite(norm)))
            if not finite:
                opt.zero_grad(set_to_none=True)  # drop the step; weights and moments untouched
                result.skipped_nonfinite += 1
                if curves:
                    curves.log(step + 1, skipped_nonfinite=1)
            else:
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                result.losses.append(loss)
                if curves:
                    curves.log(step + 1, loss=loss, lr=sched.get_last_lr()[0], grad_norm=float(norm),
                               memory_gb=memory.sample(), **stats)
            if on_step is not None:
                metrics = None
                if rt.is_main:
                    net.eval()
                    metrics = on_step(step + 1)
                    net.train()
                rt.barrier()
                if metrics and curves:
                    curves.log_eval(step + 1, metrics)
            if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0 and step + 1 < total:
                ckpt.save(step + 1, net, opt, saved_state(result, plan, batches, step + 1))
            advance(1)
    net.eval()
    result.peak_memory_gb = memory.sample()
    if curves:
        curves.close()
    return result


def saved_state(result: FitResult, plan: dict[str, Any], batches: StepBatches, step: int) -> dict[str, Any]:
    """A checkpoint's JSON state before ``step``: the result so far, the plan, and the batches' own
    state when they keep one (``checkpoint_state``)."""
    state = {"result": result.model_dump(), "plan": plan}
    if hasattr(batches, "checkpoint_state"):
        state["batches"] = batches.checkpoint_state(step)
    return state


def restore_batches(batches: StepBatches, state: dict[str, Any], where: Path) -> None:
    """Hand the batches their state saved with the checkpoint. A checkpoint from before it was
    stored goes on with the batches' state afresh (the steps to come then differ from an
    uninterrupted run's), said in a warning rather than refused: its training is not lost."""
    if not hasattr(batches, "restore"):
        return
    if "batches" not in state:
        log.warning("%s holds no state of the run's batches (written by an older trajforge): the steps "
                    "from here draw afresh, unlike an uninterrupted run", where)
        return
    batches.restore(state["batches"])


RESUMABLE_CHANGES = frozenset({"max_seconds", "eval_every", "checkpoint_every", "keep_checkpoints", "device",
                               "rollout_server"})
"""Settings a resumed run may change: budgets, bookkeeping and where it runs. Any other one would
change the data, the schedule or the loss of the steps still to come."""


def run_plan(cfg: LoraSettings, total: int, world: int) -> dict[str, Any]:
    """What a checkpoint must share with the run resuming from it (JSON, as stored)."""
    settings = {k: v for k, v in cfg.model_dump(mode="json").items() if k not in RESUMABLE_CHANGES}
    return json.loads(json.dumps({"steps": total, "processes": world, "settings": settings}))


def check_plan(state: dict[str, Any], plan: dict[str, Any], where: Path) -> None:
    """Refuse to resume from a checkpoint (its ``state.json``) of a run planned otherwise: its steps
    would silently mix two runs (another schedule length, batch, data order or number of
    processes). Of a checkpoint from before plans were recorded only the processes are checked."""
    saved = state.get("plan") or {"processes": state.get("processes", 1)}
    differ = [f"{k}: {saved[k]!r} then, {plan[k]!r} now" for k in ("steps", "processes")
              if k in saved and saved[k] != plan[k]]
    old, new = saved.get("settings"), plan["settings"]
    if old is not None:
        differ += [f"{k}: {old.get(k)!r} then, {new.get(k)!r} now" for k in sorted(set(old) | set(new))
                   if old.get(k) != new.get(k)]
    if differ:
        raise ValueError(f"cannot resume from {where}: the run is planned differently ({'; '.join(differ)}); "
                         "resume with the same settings, or start afresh without resume")


def accumulate_step(rt: Runtime, model, micro: list[Any], loss_fn: LossFn) -> tuple[float, dict[str, float]]:
    """Backward passes over this process's micro-batches of one optimizer step, gradients
    accumulated (all-reduced once, after the last); returns the step's global loss and the
    stats of this process's micro-batches (averaged)."""
    import torch

    dummy = not micro
    if dummy and rt.last_micro is None:
        raise ValueError(f"process {rt.rank} has no micro-batch in the first step: the data makes fewer "
                         f"micro-batches than the {rt.world} processes; use fewer processes or a smaller batch")
    if dummy:
        # DDP all-reduces in the last backward of every process: one with nothing to do this step
        # still runs a pass (its loss is multiplied by 0) so the others do not wait forever.
        micro = [rt.last_micro]
    rt.last_micro = micro[-1]
    local = {k: 0.0 for k in micro[0]["counts"]}
    if not dummy:
        for m in micro:
            for k, v in m["counts"].items():
                local[k] = local.get(k, 0.0) + float(v)
    totals = rt.sum(local)
    rt.acc.gradient_accumulation_steps = len(micro)
    rt.acc.step = 0  # accumulate() syncs on the last of this step's micro-batches
    loss_sum = torch.zeros((), dtype=torch.float64, device=rt.device)
    gathered: dict[str, float] = {}
    # DDP averages gradients over processes and accelerate's backward divides by the accumulation
    # steps; our losses are already shares of the step's global total, so undo both.
    scale = 0.0 if dummy else float(rt.world) * _accumulation_divisor(rt, len(micro))
    for m in micro:
        with rt.acc.accumulate(model), rt.acc.autocast():
            loss, stats = loss_fn(model, m, totals)
            rt.acc.backward(loss * scale)
        loss_sum += loss.detach().double() * (0.0 if dummy else 1.0)
        for k, v in stats.items():
            gathered[k] = gathered.get(k, 0.0) + float(v) / len(micro)
    step_loss = rt.sum({"loss": float(loss_sum)})["loss"]
    return step_loss, gathered


def _accumulation_divisor(rt: Runtime, micro: int) -> float:
    """What ``accelerator.backward`` divides a loss by: the accumulation steps (set to this
    step's micro-batches), or under DeepSpeed the engine's own configured accumulation."""
    if rt.acc.distributed_type.name == "DEEPSPEED":
        return float(rt.acc.state.deepspeed_plugin.deepspeed_config.get("gradient_accumulation_steps", 1))
    return float(micro)


def out_of_time(began: float, done: int, budget: float) -> bool:
    """Would one more step, at the mean pace of the ``done`` steps so far, end past ``budget``
    seconds? Never before the first step (its time is unknown) or without a budget."""
    if budget <= 0 or done == 0:
        return False
    elapsed = time.perf_counter() - began
    return elapsed + elapsed / done > budget


class PeakMemory:
    """Peak memory of this process so far, in GB: CUDA's max allocated on a GPU, else the peak
    resident set (VmHWM), which is what the kernel's OOM killer and ``plan`` speak of."""

    def __init__(self, device):
        self.device = device

    def sample(self) -> float:
        import torch

        if str(self.device).startswith("cuda"):
            return torch.cuda.max_memory_allocated(self.device) / 1e9
        return peak_rss_gb()


def peak_rss_gb() -> float:
    """This process's peak resident set size (GB), from /proc (Linux) or getrusage elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e9 if sys.platform == "darwin" else peak * 1024 / 1e9
