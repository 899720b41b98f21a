"""Seconds per optimizer step of `train sft` under different settings, measured side by side.

    TRAJFORGE_MMAP_THRESHOLD=0 .venv/bin/python benchmarks/sft_settings.py --data STORE [--steps 4,16]
        [--arms defaults,no-ckpt,no-ckpt-b4,no-ckpt-b4-d0] [--json out.json]

Every arm trains the embedded model on the same store with the same optimizer-step batch (4
sequences, or 16 for the ``mb`` arms), so a step is the same amount of learning and only its cost
differs:

- ``defaults``: the library's settings for a 4-sequence step (micro-batch 2 × accumulation 2,
  gradient checkpointing on, LoRA dropout 0.05);
- ``no-ckpt``: the same without gradient checkpointing (the shared-prefix cache then runs too);
- ``no-ckpt-b4``: and one micro-batch of 4 (the prefix is shared by 4 rows instead of 2);
- ``no-ckpt-b4-d0``: and LoRA dropout 0 (the demo's settings);
- ``auto``: nothing set but the batch: whatever ``train sft`` derives;
- ``mb4x4``, ``mb8x2``, ``mb16x1``: a 16-sequence step in micro-batches of 4, 8 or 16 (checkpointing
  off), to see what the micro-batch alone costs (compare them with each other, not with the
  4-sequence arms).

An arm written ``NAME@BYTES`` (``auto@0,auto@1048576``) runs NAME in a process of its own with
``TRAJFORGE_MMAP_THRESHOLD=BYTES`` (the host allocator is set once per process), and reports that
process's peak resident set too.

Each arm runs twice, for the two step counts of ``--steps`` (setup — model load, tokenising, the
first steps' warm-up — is in both and cancels): seconds per step = (t_long − t_short) /
(long − short). The arms run one after another in the order A B C D, then D C B A for the other
step count, so a drift of this shared machine's speed falls on every arm alike. Run it alone.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

ARMS = {
    "defaults": {"batch_size": 2, "grad_accum": 2},
    "no-ckpt": {"batch_size": 2, "grad_accum": 2, "gradient_checkpointing": False},
    "no-ckpt-b4": {"batch_size": 4, "grad_accum": 1, "gradient_checkpointing": False},
    "no-ckpt-b4-d0": {"batch_size": 4, "grad_accum": 1, "gradient_checkpointing": False, "dropout": 0.0},
    "auto": {},
    # A 16-sequence step (a store of a few thousand demonstrations derives 32) cut into micro-batches
    # of 4, 8 or 16: what the micro-batch alone costs on this device, checkpointing off.
    "mb4x4": {"batch_size": 4, "grad_accum": 4, "gradient_checkpointing": False},
    "mb8x2": {"batch_size": 8, "grad_accum": 2, "gradient_checkpointing": False},
    "mb16x1": {"batch_size": 16, "grad_accum": 1, "gradient_checkpointing": False},
}


def run_arm(trajs, model: str, settings: dict, steps: int) -> tuple[float, dict]:
    from trajforge.train.sft import SFTConfig, train_sft

    cfg = SFTConfig(**settings, max_steps=steps, seed=0)
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        train_sft(trajs, model, out, cfg, progress=False)
        seconds = time.perf_counter() - t0
        meta = json.load(open(f"{out}/trajforge_adapter.json"))["config"]
    # (No memory column: the process's peak resident set only ever rises across the arms.)
    return seconds, {k: meta[k] for k in ("batch_size", "grad_accum", "gradient_checkpointing", "dropout")}


def run_isolated(data: str, model: str, arm: str, steps: int) -> tuple[float, dict]:
    """``arm`` (``NAME@BYTES``) in a process of its own under that mmap threshold."""
    import os
    import subprocess
    import sys

    name, threshold = arm.split("@")
    env = {**os.environ, "TRAJFORGE_MMAP_THRESHOLD": threshold}
    out = subprocess.run([sys.executable, __file__, "--data", data, "--model", model, "--child", name, str(steps)],
                         env=env, capture_output=True, text=True, check=True).stdout
    child = json.loads(out.strip().splitlines()[-1])
    return child["seconds"], {**child["settings"], "peak_gb": child["peak_gb"]}


def peak_resident_gb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 / 1e9 for line in f if line.startswith("VmHWM:"))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a trajectory store (e.g. runs/demo/train_store)")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--steps", default="4,16", help="short,long optimizer-step counts")
    ap.add_argument("--arms", default="defaults,no-ckpt,no-ckpt-b4,no-ckpt-b4-d0")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", nargs=2, metavar=("ARM", "STEPS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from trajforge.store import TrajectoryStore

    trajs = TrajectoryStore(args.data).read()
    if args.child:
        seconds, settings = run_arm(trajs, args.model, ARMS[args.child[0]], int(args.child[1]))
        print(json.dumps({"seconds": seconds, "settings": settings, "peak_gb": round(peak_resident_gb(), 2)}))
        return {}
    short, long_ = (int(x) for x in args.steps.split(","))
    arms = args.arms.split(",")
    times: dict[str, dict[int, float]] = {a: {} for a in arms}
    used: dict[str, dict] = {}
    for steps, order in ((short, arms), (long_, arms[::-1])):
        for arm in order:
            times[arm][steps], used[arm] = (run_isolated(args.data, args.model, arm, steps) if "@" in arm
                                            else run_arm(trajs, args.model, ARMS[arm], steps))
            print(f"{arm:16s} {steps:3d} steps {times[arm][steps]:7.1f} s", flush=True)
    ref = arms[0]
    per = {a: (times[a][long_] - times[a][short]) / (long_ - short) for a in arms}
    print(f"\n{'arm':16s} {'s/step':>7s} {'vs ' + ref:>10s}  settings")
    for a in arms:
        print(f"{a:16s} {per[a]:7.2f} {per[a] / per[ref]:10.2f}  {used[a]}")
    out = {"steps": [short, long_], "seconds": times, "per_step": per, "settings": used}
    if args.json:
        json.dump(out, open(args.json, "w"), indent=1)
    return out


if __name__ == "__main__":
    main()
