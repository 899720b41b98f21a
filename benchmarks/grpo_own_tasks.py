"""Does GRPO learn on its own training tasks? Before/after on exactly the tasks it trained on.

    .venv/bin/python benchmarks/grpo_own_tasks.py --sft RUN/sft --samples RUN/dpo-samples --out OUT

``RUN`` is a ``benchmarks/learning.py --out RUN`` directory: its SFT adapter, and the SFT model's
graded T=0.8 samples on train tasks. The GRPO pool is every sampled task the SFT model did not
solve every time (so each group can carry signal). Measured on that pool, in one harness
(``max_consecutive_errors=2``): greedy completion and pass@k of 4 samples at T=0.8, before (SFT)
and after GRPO (8 steps × 8 tasks × G=4, lr 5e-4, uniform draw, guided exploration), then the
GRPO model's greedy held-out completion. Separates "the RL update does not learn" from "what it
learns does not transfer to held-out tasks".
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sft", required=True, help="SFT adapter GRPO starts from")
    ap.add_argument("--samples", required=True, help="store of the SFT model's graded samples on train tasks")
    ap.add_argument("--out", default="runs/grpo-own-tasks")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--n", type=int, default=260)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from trajforge.eval.run import collect
    from trajforge.grade.metrics import evaluate
    from trajforge.harness import HarnessConfig
    from trajforge.policies import make_policy
    from trajforge.store import TrajectoryStore
    from trajforge.tasks import synthesize
    from trajforge.train.grpo import GRPOConfig, drop_solved, train_grpo

    out = Path(args.out)
    tasks = synthesize("sql", args.n, args.seed).tasks
    samples = TrajectoryStore(args.samples).read()
    sampled = {t.task_id for t in samples}
    pool, _ = drop_solved([t for t in tasks if t.split == "train" and t.id in sampled], samples)
    heldout = [t for t in tasks if t.split == "heldout"]
    harness = HarnessConfig(max_consecutive_errors=2)
    print(f"{len(pool)} GRPO tasks (sampled, not always solved by SFT)")

    def measure(label: str, adapter: Path | str, pool, samples: int = 1, temperature: float = 0.0):
        store = out / label
        for old in store.glob("*.jsonl"):
            old.unlink()
        opts = {"temperature": temperature} if temperature else {}
        trajs = collect(pool, make_policy(f"hf:{args.model}@{adapter}", name=label, batch_size=64, **opts),
                        store, samples=samples, harness=harness, show_progress=False)
        r = evaluate(trajs)
        print(f"{label}: completion {r['completion']:.3f}, pass@k {r.get('pass_at_k', '-')}", flush=True)

    t0 = time.perf_counter()
    measure("sft-greedy", args.sft, pool)
    measure("sft-sampled", args.sft, pool, samples=4, temperature=0.8)
    res = train_grpo(pool, args.model, out / "grpo", GRPOConfig(
        steps=args.steps, batch_size=8, group_size=4, temperature=0.8, max_turns=6, lr=args.lr, r=16,
        alpha=32, dropout=0.0, curriculum=False, guided=True, seed=args.seed),
        init_adapter=args.sft, progress=False)
    print(f"grpo: {res.steps} steps in {res.seconds:.0f}s; rewards {[round(x, 3) for x in res.rewards]}; "
          f"solved {res.solve_rates}; rescue {res.rescue}", flush=True)
    measure("grpo-greedy", out / "grpo", pool)
    measure("grpo-sampled", out / "grpo", pool, samples=4, temperature=0.8)
    measure("grpo-heldout-greedy", out / "grpo", heldout)
    print(f"total {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
