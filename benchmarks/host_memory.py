"""Leak or high-water? Resident memory of CPU training steps, glibc's default allocator vs ours.

    python benchmarks/host_memory.py                     # embedded model, ~5 minutes on 2 cores
    python benchmarks/host_memory.py --lengths 256,1024 --repeat 3 --json out.json

Each arm runs in its own process: the embedded model with ``train sft``'s LoRA and checkpointing
defaults, micro-batches of 2 sequences whose length changes from step to step as random batches
of real data do (short, long, short again), then the same long batch several times. After every
optimizer step it reads the process's resident size (VmRSS) and its peak (VmHWM).

- ``glibc``: the C library's defaults (``TRAJFORGE_MMAP_THRESHOLD=0``), what training did before.
- ``trajforge``: ``train.host_memory.return_freed_blocks`` as every training run now applies it.

A leak grows while the same batch repeats; a high-water mark grows only with longer batches and
stays after shorter ones. The table shows which, per arm, and the step time ratio (the cost of
giving memory back).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _status() -> tuple[float, float]:
    rss = hwm = 0.0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024 / 1e9
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024 / 1e9
    return rss, hwm


def arm(lengths: list[int], repeat: int, batch: int) -> list[dict]:
    """One arm's steps (run in a fresh process: the allocator's state is per process)."""
    from trajforge.train.host_memory import return_freed_blocks

    return_freed_blocks()
    import torch

    from trajforge.policies.models import resolve
    from trajforge.train.losses import lm_loss_sum
    from trajforge.train.model import lora_model
    from trajforge.train.sft import SFTConfig

    torch.manual_seed(0)
    net, _ = lora_model(resolve("smollm2-135m"), SFTConfig(dtype="float32"))
    net.train()
    opt = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=1e-4)
    rows = []
    for n in [*lengths, *[max(lengths)] * repeat]:
        ids = torch.randint(100, 40000, (batch, n))
        labels = ids.clone()
        labels[:, : n // 2] = -100  # loss on the second half, as on completions
        start = time.perf_counter()
        lm_loss_sum(net, ids, torch.ones_like(ids), labels, share_prefix=False).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        rss, hwm = _status()
        rows.append({"tokens": n, "s": time.perf_counter() - start, "rss_gb": rss, "hwm_gb": hwm})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="256,1024,256,512,1024,768,256",
                    help="tokens per sequence, one micro-batch each, in this order")
    ap.add_argument("--repeat", type=int, default=4, help="then the longest batch this many times")
    ap.add_argument("--batch", type=int, default=2, help="sequences per micro-batch (train sft's default)")
    ap.add_argument("--threshold", type=int, default=None,
                    help="our arm's TRAJFORGE_MMAP_THRESHOLD in bytes (default: training's own)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--arm", choices=["glibc", "trajforge"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    if args.arm:
        print(json.dumps(arm(lengths, args.repeat, args.batch)))
        return
    results = {}
    for name in ("glibc", "trajforge"):
        env = {k: v for k, v in os.environ.items() if k != "TRAJFORGE_MMAP_THRESHOLD"}
        if name == "glibc":
            env["TRAJFORGE_MMAP_THRESHOLD"] = "0"
        elif args.threshold is not None:
            env["TRAJFORGE_MMAP_THRESHOLD"] = str(args.threshold)
        out = subprocess.run([sys.executable, __file__, "--arm", name, "--lengths", args.lengths,
                              "--repeat", str(args.repeat), "--batch", str(args.batch)],
                             env=env, capture_output=True, text=True, check=True).stdout
        results[name] = json.loads(out.strip().splitlines()[-1])
    a, b = results["glibc"], results["trajforge"]
    print(f"{'step':>4} {'tokens':>6} | {'glibc rss':>9} {'peak':>6} | {'ours rss':>8} {'peak':>6} |  s/step ratio")
    for i, (x, y) in enumerate(zip(a, b), 1):
        print(f"{i:>4} {x['tokens']:>6} | {x['rss_gb']:>9.2f} {x['hwm_gb']:>6.2f} | {y['rss_gb']:>8.2f} "
              f"{y['hwm_gb']:>6.2f} |  {y['s'] / x['s']:.2f}")
    tail = len(lengths)
    for name, rows in results.items():
        repeat = rows[tail - 1:]
        grew = repeat[-1]["rss_gb"] - repeat[0]["rss_gb"]
        print(f"{name}: peak {max(r['hwm_gb'] for r in rows):.2f} GB; over {len(repeat)} repeats of the longest "
              f"batch resident memory moved {grew:+.2f} GB; final resident {rows[-1]['rss_gb']:.2f} GB")
    ta, tb = sum(r["s"] for r in a[1:]), sum(r["s"] for r in b[1:])
    print(f"step time ours/glibc (first step excluded): {tb / ta:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
