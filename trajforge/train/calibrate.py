"""A short real SFT run that measures tokens/s and peak memory on the hardware at hand.

    python -m trajforge.train.calibrate --model smollm2-135m --data store/ --out runs/cal \\
        --settings '{"max_steps": 6, "replay_share": 0}'

``trajforge plan --calibrate``, ``benchmarks/plan_check.py`` and ``benchmarks/gpu_check.py`` call
``measure_sft``: it runs ``train_sft`` itself — the same loader, sequence builder, loss and loop
as ``trajforge train sft`` — in a subprocess of its own, so the peak it reports is that run's alone
(CUDA: ``torch.cuda.max_memory_allocated``; CPU: the process's peak resident set, VmHWM).
A ``StepClock`` rides along as the in-loop hook and records, at the end of every optimizer step,
the time and the memory so far, so throughput excludes loading and the first (warm-up) step, and
one can see whether memory still climbs after several steps.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from pydantic import BaseModel

RESULT = "measurement.json"


class Measurement(BaseModel):
    """One measured SFT run."""

    device: str
    steps: int
    samples: int
    tokens: int
    """Tokens of the micro-batches the run trained on (unpadded)."""
    seconds: float
    """The whole ``train_sft`` call: loading, samples, training, saving."""
    step_ends: list[float]
    """Seconds since the call began at the end of each optimizer step."""
    memory_gb: list[float]
    """Peak memory so far at the end of each step (CPU: VmHWM; CUDA: max allocated)."""
    resident_gb: list[float] = []
    """CPU only: resident set (VmRSS) at the end of each step."""
    peak_gb: float
    """``SFTResult.peak_memory_gb``: the peak at the end of training."""
    tokens_per_s: float
    """Tokens per second after the first step (steps 2..N; the first pays for warm-up)."""
    skipped: dict[str, int] = {}


def status_gb(key: str) -> float:
    """A ``/proc/self/status`` memory line (VmRSS, VmHWM) in GB; 0 where it cannot be read."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return 0.0


class StepClock:
    """``train_sft``'s in-loop hook (it takes anything with ``hook(net, tok)``): records the time and
    memory at the end of every step, evaluates nothing."""

    def __init__(self, device: str):
        self.device = device
        self.began = time.perf_counter()
        self.ends: list[float] = []
        self.memory: list[float] = []
        self.resident: list[float] = []

    def hook(self, net, tok):
        def on_step(step: int):
            self.ends.append(time.perf_counter() - self.began)
            if self.device.startswith("cuda"):
                import torch

                self.memory.append(torch.cuda.max_memory_allocated() / 1e9)
            else:
                self.memory.append(status_gb("VmHWM"))
                self.resident.append(status_gb("VmRSS"))
            return None

        return on_step


def run_here(model: str, store: str, out: str, settings: dict) -> Measurement:
    """Train in this process (the subprocess ``measure_sft`` starts)."""
    from trajforge.policies.devices import pick_device
    from trajforge.store import TrajectoryStore
    from trajforge.train.sft import SFTConfig, train_sft

    cfg = SFTConfig(**settings)
    device = pick_device(cfg.device)
    clock = StepClock(device)
    res = train_sft(TrajectoryStore(store).read(), model, out, cfg, progress=False, evaluator=clock)
    ends = clock.ends
    later = (res.tokens * (len(ends) - 1) / len(ends)) / (ends[-1] - ends[0]) if len(ends) > 1 else 0.0
    return Measurement(device=device, steps=res.steps, samples=res.samples, tokens=res.tokens,
                       seconds=round(res.seconds, 2), step_ends=[round(t, 2) for t in ends],
                       memory_gb=[round(m, 4) for m in clock.memory], resident_gb=[round(m, 4) for m in clock.resident],
                       peak_gb=res.peak_memory_gb, tokens_per_s=round(later, 1), skipped=res.skipped)


def measure_sft(model: str, store: str | Path, settings: dict, out: str | Path, timeout: float | None = None,
                env: dict | None = None, nice: int = 0) -> Measurement:
    """``train_sft(store, model, settings)`` in a fresh subprocess; its ``Measurement``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULT).unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "trajforge.train.calibrate", "--model", str(model), "--data", str(store),
           "--out", str(out), "--settings", json.dumps(settings)]
    if nice:
        cmd = ["nice", "-n", str(nice), *cmd]
    proc = subprocess.run(cmd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not (out / RESULT).exists():
        raise RuntimeError(f"calibration run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return Measurement.model_validate_json((out / RESULT).read_text())


def synthetic_store(out: str | Path, n: int = 24, seed: int = 0) -> Path:
    """A store of executed expert SQL episodes (for a calibration without ``--data``)."""
    from trajforge.grade import graded
    from trajforge.harness import run_episodes
    from trajforge.policies import make_policy
    from trajforge.store import TrajectoryStore
    from trajforge.tasks import synthesize

    tasks = [t for t in synthesize("sql", 3 * n, seed=seed).tasks if t.split == "train"][:n]
    store = TrajectoryStore(out)
    for traj in run_episodes(tasks, make_policy("expert")):
        store.append(graded(traj))
    return Path(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, help="store of graded trajectories")
    ap.add_argument("--out", required=True, help="folder for the adapter and measurement.json")
    ap.add_argument("--settings", default="{}", help="SFTConfig fields as JSON")
    args = ap.parse_args(argv)
    measured = run_here(args.model, args.data, args.out, json.loads(args.settings))
    (Path(args.out) / RESULT).write_text(measured.model_dump_json(indent=1))


if __name__ == "__main__":
    main()
