"""What a derived micro-batch's step composition costs: tokens run per token of data, by micro-batch.

    .venv/bin/python benchmarks/composition.py --data runs/demo/train_store [--step 32]
    .venv/bin/python benchmarks/composition.py --build /tmp/mix         # a four-environment pool
    .venv/bin/python benchmarks/composition.py --data /tmp/mix --processes 4

A run whose micro-batch is derived from the device's memory composes its optimizer steps without
looking at the micro-batch (``sft.run_rows``), so what is learned never depends on the card; the
micro-batch only cuts each step, sorted by length. How much a micro-batch then pads depends on how
the step was composed. For each composition and micro-batch this prints, over the run's own
samples (tokenised by the real sequence builder, three seeds averaged):

- ``pad``: padded positions ÷ real tokens (``sequences.collate``'s padding);
- ``run``: positions the forward pass runs ÷ real tokens — the shared prompt prefix once per
  micro-batch, each row's suffix after it (``losses.decoder_hidden``; the plan's count). With
  ``--processes N`` a step's micro-batches go round-robin to N processes (as ``sft.LoaderBatches``
  shards them) and a step counts N × its busiest process: the others wait for it.

Compositions: ``pairs`` (random length pairs, the rule until stop 56), ``step``
(``defaults.step_length_unit``: one length group a step, the rule now), ``half-step`` (two
length groups a step), and ``micro`` (groups of the micro-batch itself: what a ``--batch-size``
the user gave did until stop 56; it now groups by its step). These are token counts, the same on
every machine; what a step costs in seconds is ``benchmarks/sft_settings.py``'s.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ENVS = ("sql", "travel", "web", "code")


def build_pool(out: Path, n: int = 200, seed: int = 3) -> Path:
    """The expert's train episodes of four environments in one store (their toolsets, prompts and
    lengths differ, as a user's multi-tool data does)."""
    from trajforge.eval.run import collect
    from trajforge.policies import make_policy
    from trajforge.tasks import synthesize

    for env in ENVS:
        tasks = [t for t in synthesize(env, n, seed).tasks if t.split == "train"]
        collect(tasks, make_policy("expert"), out)
    return out


def micro_cost(samples, rows: list[int]) -> tuple[int, int]:
    """(padded positions, positions run) of one micro-batch."""
    from trajforge.train.plan import Workload, positions_run
    from trajforge.train.plan_data import micro_batch

    n, width, loss, prefix = micro_batch([samples[i] for i in rows])
    return n * width, positions_run(Workload(rows=n, width=width, loss_tokens=loss, prefix=prefix))


def costs(samples, rows: list[list[int]], per_step: int = 1, processes: int = 1) -> tuple[int, int]:
    """(padded positions, positions run) of the micro-batches ``rows``, ``per_step`` of them a
    step, on ``processes`` (round-robin): each step counts its busiest process's, times N."""
    padded = run = 0
    for k in range(0, len(rows), per_step):
        busy = [[0, 0] for _ in range(processes)]
        for j, r in enumerate(rows[k: k + per_step]):
            p, c = micro_cost(samples, r)
            busy[j % processes][0] += p
            busy[j % processes][1] += c
        padded += processes * max(b[0] for b in busy)
        run += processes * max(b[1] for b in busy)
    return padded, run


def compositions(step: int, micro: int) -> dict[str, dict]:
    """``epoch_rows`` arguments of each composition at ``micro`` sequences of a ``step``."""
    from trajforge.train.defaults import MICRO_BATCH_FALLBACK, step_length_unit

    return {"pairs": {"unit": MICRO_BATCH_FALLBACK, "step": step},
            "step": {"unit": step_length_unit(step), "step": step},
            "half-step": {"unit": max(MICRO_BATCH_FALLBACK, step // 2), "step": step},
            "micro": {"unit": micro}}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, help="a trajectory store")
    ap.add_argument("--build", type=Path, help="build the four-environment pool here first (~1 min), then use it")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--step", type=int, default=32, help="sequences per optimizer step (all processes)")
    ap.add_argument("--processes", type=int, default=1, help="data-parallel processes sharing a step")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if not (args.data or args.build):
        ap.error("give --data STORE or --build DIR")
    from trajforge.store import TrajectoryStore
    from trajforge.train.plan_data import tokenizer_for
    from trajforge.train.sft import SFTConfig, build_samples, epoch_rows, select

    store = build_pool(args.build) if args.build else args.data
    cfg = SFTConfig()
    data, skipped = select(TrajectoryStore(store).read(), cfg)
    tok, _ = tokenizer_for(args.model)
    samples, _ = build_samples(data, tok, args.model, cfg, skipped)
    real = sum(len(s.input_ids) for s in samples)
    lengths = sorted(len(s.input_ids) for s in samples)
    print(f"{len(samples)} samples, {real} tokens, lengths {lengths[0]}–{lengths[-1]} (median "
          f"{lengths[len(lengths) // 2]}); a step of {args.step} sequences on {args.processes} process(es)")
    share = args.step // args.processes
    micros = [1 << k for k in range(share.bit_length()) if 1 << k <= share]
    table: dict[str, dict[int, dict[str, float]]] = {}
    for m in micros:
        for name, kw in compositions(args.step, m).items():
            per = [costs(samples, epoch_rows(samples, 1.0, m, seed, **kw), args.step // m, args.processes)
                   for seed in range(args.seeds)]
            table.setdefault(name, {})[m] = {"pad": round(sum(p for p, _ in per) / len(per) / real, 3),
                                             "run": round(sum(r for _, r in per) / len(per) / real, 3)}
    print(f"\n{'micro-batch':>11s}  " + "  ".join(f"{n + ' pad/run':>20s}" for n in table))
    for m in micros:
        print(f"{m:11d}  " + "  ".join(f"{table[n][m]['pad']:9.3f} {table[n][m]['run']:10.3f}" for n in table))
    out = {"store": str(store), "samples": len(samples), "tokens": real, "step": args.step,
           "processes": args.processes, "table": table}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
