"""One micro-batch's peak host memory against the plan's activations + LM-head logits, per shape.

    .venv/bin/python benchmarks/head_memory.py [--out /tmp/head-memory]

``benchmarks/plan_check.py`` compares whole ``train sft`` runs with ``trajforge plan``; their peaks
mix the interpreter, the data, the allocator's retention and the step's tensors. This script
isolates the step: for tiny llamas built from configs (random init, the embedded model's 49,152
vocabulary), it builds the model the trainer builds (``train.model.lora_model``, fp32), runs
``losses.masked_lm_loss`` forward and backward on one micro-batch of 4 × 904 tokens, and reads the
process's peak resident set (``VmHWM``, reset through ``/proc/self/clear_refs`` before the step)
above the resident set just before it. Next to it: ``plan.activation_peak`` for the same shape,
settings and workload (activations + ``LOGIT_COPIES`` copies of a head chunk). Each configuration
runs in its own process (three steps; the last is reported) under training's 1 MiB mmap threshold,
so freed tensors leave the process as they would in ``train sft``.

Configurations: loss positions 1,066 (one head chunk) and 2,200 (two, each recomputed in the
backward), gradient checkpointing on and off, every layer or only the top 2 adapted
(``--lora-layers``). Prints a table and exits 1 when a ratio leaves ±10%.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = {
    "256x4": {"hidden_size": 256, "num_hidden_layers": 4, "intermediate_size": 768,
              "num_attention_heads": 4, "num_key_value_heads": 2},
    "384x8": {"hidden_size": 384, "num_hidden_layers": 8, "intermediate_size": 1024,
              "num_attention_heads": 6, "num_key_value_heads": 2},
}
RUNS = [  # (shape, lora_layers, loss positions, gradient checkpointing)
    ("256x4", 0, 1066, True), ("256x4", 0, 2200, True), ("256x4", 0, 1066, False), ("256x4", 0, 2200, False),
    ("384x8", 2, 1066, False), ("384x8", 0, 1066, False), ("384x8", 2, 2200, False), ("384x8", 0, 2200, False),
]
ROWS, WIDTH = 4, 904
PREFIX = 391
"""Tokens every row shares (the system prompt of agent data): the shared-prefix path runs them once."""


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))


def measure(model: str, lora_layers: int, loss_tokens: int, checkpointing: bool) -> dict:
    """In this process: the step's peak above the resident set before it (bytes), three steps."""
    import gc

    import torch

    from trajforge.train.host_memory import return_freed_blocks
    from trajforge.train.losses import masked_lm_loss
    from trajforge.train.model import lora_model
    from trajforge.train.sft import SFTConfig

    return_freed_blocks()
    torch.set_num_threads(2)
    cfg = SFTConfig(device="cpu", dtype="float32", dropout=0.0, lora_layers=lora_layers,
                    gradient_checkpointing=checkpointing)
    net, _ = lora_model(model, cfg)
    net.train()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 49152, (ROWS, WIDTH), generator=g)
    ids[:, :PREFIX] = ids[:1, :PREFIX]
    labels = torch.full_like(ids, -100)
    labels[:, -(loss_tokens // ROWS):] = ids[:, -(loss_tokens // ROWS):]
    mask = torch.ones_like(ids)
    peaks = []
    for _ in range(3):
        gc.collect()
        before = _status("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # the peak resident set restarts from now
        masked_lm_loss(net, ids, mask, labels, share_prefix=True).backward()
        peaks.append(_status("VmHWM") - before)
        net.zero_grad(set_to_none=True)
    return {"peak_above_bytes": peaks[-1]}


def predicted(model: str, lora_layers: int, loss_tokens: int, checkpointing: bool) -> dict:
    from trajforge.train.plan import Workload, activation_peak
    from trajforge.train.sft import SFTConfig
    from trajforge.train.shapes import model_shape

    cfg = SFTConfig(dropout=0.0, lora_layers=lora_layers, gradient_checkpointing=checkpointing,
                    batch_size=ROWS, max_len=WIDTH)
    work = Workload(rows=ROWS, width=WIDTH, loss_tokens=loss_tokens, prefix=PREFIX)
    peak = activation_peak(model_shape(model), cfg, work, 4, "cpu")
    return {"activations_bytes": peak.activations, "logits_bytes": peak.logits}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/head-memory"))
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one run (JSON) in this process
    args = ap.parse_args()
    if args.one:
        model, layers, tokens, ckpt = json.loads(args.one)
        print(json.dumps(measure(model, layers, tokens, ckpt)))
        return
    from benchmarks.plan_check import tiny_llama

    bad = []
    print(f"{'shape':6s} {'layers':>6s} {'loss':>5s} {'ckpt':>5s} | {'measured GB':>11s} {'plan GB':>8s} "
          f"(act + logits) | ratio")
    for shape, layers, tokens, ckpt in RUNS:
        model = args.out / shape
        if not (model / "config.json").exists():
            tiny_llama(model, SHAPES[shape])
        run = json.dumps([str(model), layers, tokens, ckpt])
        env = {**os.environ, "TRAJFORGE_MMAP_THRESHOLD": str(1 << 20)}
        out = subprocess.run([sys.executable, __file__, "--one", run], capture_output=True, text=True,
                             check=True, env=env).stdout
        got = json.loads(out.strip().splitlines()[-1])["peak_above_bytes"]
        plan = predicted(str(model), layers, tokens, ckpt)
        want = plan["activations_bytes"] + plan["logits_bytes"]
        ratio = want / got
        if not 0.9 <= ratio <= 1.1:
            bad.append((shape, layers, tokens, ckpt))
        print(f"{shape:6s} {layers or 'all':>6} {tokens:5d} {str(ckpt):>5s} | {got / 1e9:11.3f} {want / 1e9:8.3f} "
              f"({plan['activations_bytes'] / 1e9:.3f} + {plan['logits_bytes'] / 1e9:.3f}) | {ratio:.3f}", flush=True)
    print("all within ±10%" if not bad else f"outside ±10%: {bad}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
