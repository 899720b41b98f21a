"""``trajforge plan``: what a LoRA run needs before it starts — memory per device, serving, time, cost.

    trajforge plan --model qwen2.5-7b --batch 4 --grad-accum 8 --gpu-gb 24
    trajforge plan --model smollm2-135m --data store/ --device cpu --json
    trajforge plan --model dense-17b --serve-max-len 4096 --serve-concurrency 8 --price-per-hour 2.5
    trajforge plan --model runs/my-model --data store/ --calibrate      # measure tokens/s here

The settings options are ``train sft``'s, generated from ``SFTConfig`` with its defaults
(``--lora-r`` is ``r``, ``--batch`` is ``batch_size``); the rest describe the hardware and the
serving load. ``--json`` prints only JSON on stdout (``train.plan.Plan``). The arithmetic is in
``train/plan.py``; ``benchmarks/plan_check.py`` checks it against measured peaks.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import typer

from trajforge.cli.options import Options, with_configs
from trajforge.cli.train_cmd import EIGHT_BIT, FOUR_BIT, _hardware
from trajforge.train.plan import GPU_GB, PLANNED_SETTINGS, SERVE_CONCURRENCY
from trajforge.train.sft import SFTConfig

PLAN_OPTIONS = Options(SFTConfig, only=PLANNED_SETTINGS + ("tiers", "dialect", "render_mode", "seed"),
                       exclude=("load_in",), flags={"r": "--lora-r", "batch_size": "--batch"})
"""``train sft``'s settings that change the plan, under the flags of the CLI contract (issue 12)."""


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def default_device() -> str:
    """The device ``train sft`` would pick here, without importing torch: ``$TRAJFORGE_DEVICE``,
    else CUDA when the NVIDIA driver lists a GPU, else the CPU."""
    from trajforge.policies.devices import DEVICE_ENV

    name = (os.environ.get(DEVICE_ENV) or "").split(":")[0].lower()
    if name in ("cpu", "cuda"):
        return name
    gpus = Path("/proc/driver/nvidia/gpus")
    return "cuda" if gpus.is_dir() and any(gpus.iterdir()) else "cpu"


def detected_gpu_gb() -> float | None:
    """Memory of this machine's first GPU from ``nvidia-smi`` (None without one)."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.split()
        return float(out[0]) * 2 ** 20 / 1e9 if out else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _calibrated(model: str, data: Optional[Path], cfg: SFTConfig, device: str) -> float:
    """tokens/s of a short real SFT run here with these settings (``train.calibrate``)."""
    from trajforge.train.calibrate import measure_sft, synthetic_store

    with tempfile.TemporaryDirectory(prefix="trajforge-calibrate-") as tmp:
        store = data or synthetic_store(Path(tmp) / "store")
        settings = {**cfg.model_dump(), "max_steps": 4, "replay_share": 0.0, "device": device}
        measured = measure_sft(model, store, settings, Path(tmp) / "run")
    typer.echo(f"calibration: {measured.steps} steps, {measured.tokens_per_s:.1f} tokens/s after the first, "
               f"peak {measured.peak_gb:.2f} GB", err=True)
    return measured.tokens_per_s


def _demonstrations(data: Path, cfg: SFTConfig) -> int:
    """How many of the store's trajectories ``train sft`` would train on (its tiers)."""
    from trajforge.store import TrajectoryStore
    from trajforge.train.sft import select

    return len(select(TrajectoryStore(data).read(), cfg)[0])


@with_configs(cfg=PLAN_OPTIONS)
def plan(cfg: SFTConfig = None,
         model: str = typer.Option("smollm2-135m", help="a folder with config.json, smollm2-135m, or a known "
                                   "name (qwen2.5-7b, llama-3.1-8b, dense-17b, ...)"),
         data: Optional[Path] = typer.Option(None, help="a store: plan for its sequence lengths"),
         device: Optional[str] = typer.Option(None, help="cpu or cuda (default: what train sft would use here)"),
         gpus: int = typer.Option(1, min=1, help="GPUs (processes) training together"),
         gpu_gb: Optional[float] = typer.Option(None, help=f"memory of one GPU in GB (default: this machine's, "
                                                f"else {GPU_GB:.0f})"),
         serve_max_len: Optional[int] = typer.Option(None, min=1, help="vLLM max model length (default: --max-len)"),
         serve_concurrency: int = typer.Option(SERVE_CONCURRENCY, min=1,
                                               help="sequences served at once at that length"),
         price_per_hour: Optional[float] = typer.Option(None, min=0, help="price of one GPU-hour, for the cost"),
         tokens_per_s: Optional[float] = typer.Option(None, help="training throughput, all GPUs together"),
         calibrate: bool = typer.Option(False, "--calibrate", help="measure tokens/s with a short real run here"),
         samples: int = typer.Option(1000, min=1, help="dataset size in samples when there is no --data"),
         load_in_4bit: bool = FOUR_BIT, load_in_8bit: bool = EIGHT_BIT,
         json_out: bool = typer.Option(False, "--json", help="print only the plan as JSON")) -> None:
    """Memory per device (training and vLLM serving), time and cost of a LoRA SFT run."""
    from trajforge.train.defaults import derive
    from trajforge.train.plan import Hardware, make_plan
    from trajforge.train.shapes import model_shape

    cfg = _hardware(cfg, load_in_4bit, load_in_8bit, 0.0)
    device = (device or default_device()).lower()
    if device not in ("cpu", "cuda"):
        _fail(f"--device {device!r}: plan knows cpu and cuda")
    for flag, value in (("--gpu-gb", gpu_gb), ("--tokens-per-s", tokens_per_s)):
        if value is not None and not (0 < value < math.inf):  # nan and inf pass a bare "> 0" check
            _fail(f"{flag} must be above 0 and finite, not {value:g}")
    if price_per_hour is not None and not math.isfinite(price_per_hour):
        _fail(f"--price-per-hour must be a finite number, not {price_per_hour:g}")
    try:
        shape = model_shape(model)
        # Derived here from the store's demonstrations, exactly as train sft derives them.
        cfg, derived = derive(cfg, shape.params().total, _demonstrations(data, cfg) if data else samples, gpus)
        hw = Hardware(device=device, gpus=gpus, gpu_gb=gpu_gb or detected_gpu_gb() or GPU_GB)
        stats = None
        if data is not None:  # its micro-batches, a derived micro-batch settled for hw as train sft settles it
            from trajforge.train.plan_data import read_data

            stats = read_data(data, model, cfg, hw, derived)
            cfg = cfg.model_copy(update={"batch_size": stats.batch_size, "grad_accum": stats.grad_accum})
        elif cfg.batch_size is None:
            from trajforge.train.plan_data import settle_for

            cfg = settle_for(cfg, derived, shape, hw)
        source = "given"
        if calibrate:
            tokens_per_s, source = _calibrated(model, data, cfg, device), f"calibrated on {device} here"
        result = make_plan(shape, cfg, hw, stats, serve_max_len, serve_concurrency, price_per_hour,
                           tokens_per_s, source, samples)
        result.notes = [f"derived: {why}" for why in derived.why] + result.notes
    except (ValueError, OSError, RuntimeError) as e:
        _fail(str(e))
    if json_out:
        sys.stdout.write(json.dumps(result.model_dump(mode="json"), indent=1) + "\n")
        return
    typer.echo(render(result))


def render(p) -> str:
    """The plan as a few lines for a terminal."""
    t, s, tm, w = p.train, p.serve, p.time, p.workload
    hw = p.hardware
    where = f"{hw.gpus} × {hw.device}" + (f" ({hw.gpu_gb:.0f} GB)" if hw.device == "cuda" else "")
    lines = [
        f"{p.model.name}: {p.params / 1e9:.3f}B parameters ({p.model.source})",
        f"train on {where}, {t.dtype}, LoRA r={p.settings['r']} ({t.lora_params / 1e6:.1f}M trainable), "
        f"micro-batch {w.rows} × {w.width} tokens ({w.source}), checkpointing "
        f"{'on' if p.settings['gradient_checkpointing'] else 'off'}, {p.settings['distributed'] if hw.gpus > 1 else 'one process'}",
        f"  weights {t.weights_gb:.2f} + LoRA state {t.lora_gb:.2f} + activations {t.activations_gb:.2f} "
        f"+ logits {t.logits_gb:.2f} + runtime {t.runtime_gb:.2f} = {t.total_gb:.2f} GB per device "
        f"({'fits' if t.fits else 'does NOT fit'})",
        f"serve (vLLM) at {s.max_model_len} tokens × {s.concurrency}: weights {s.weights_gb:.2f} + KV cache "
        f"{s.kv_cache_gb:.2f} + buffers {s.buffers_gb:.2f} = {s.total_gb:.2f} GB; --tensor-parallel-size "
        f"{s.tensor_parallel_size} --gpu-memory-utilization {s.gpu_memory_utilization} --max-model-len {s.max_model_len}",
        f"time: {tm.tokens:,} tokens at {tm.tokens_per_s:,.1f} tokens/s ({tm.tokens_per_s_source}) = "
        f"{tm.hours:.2f} h" + (f", {tm.gpu_hours:.2f} GPU-h, cost {tm.cost:.2f}" if tm.cost is not None else ""),
    ]
    lines += [f"note: {n}" for n in p.notes]
    return "\n".join(lines)
