"""Time ``trajforge report`` on a run of 1,000 episodes (target: under 10 s).

    .venv/bin/python benchmarks/report.py [--episodes 1000] [--reps 3]

Builds a run directory like ``trajforge demo`` leaves (an eval store with base and tuned on the
same tasks, metrics.json, a 2,000-step curves.jsonl; see synthetic_runs.py), then times the whole
``write_report`` and its stages: reading the run, per-policy metrics, every figure, the flipped
tasks rendered as conversations. Prints the median over ``--reps`` runs against the target, as wall
time and as this process's CPU time (the report is single-threaded, so on a machine shared with
other jobs the CPU time is what the wall time would be on an idle one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from synthetic_runs import write_curves, write_store

TARGET_S = 10.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()

    from trajforge.eval import plots, report
    from trajforge.eval.rundir import load_run, pick_pair

    tmp = tempfile.TemporaryDirectory(prefix="trajforge-bench-report-")
    root = Path(tmp.name) / "run"
    shard = write_store(root / "eval_store", args.episodes)
    write_curves(root / "adapter" / "curves.jsonl")
    (root / "metrics.json").write_text(json.dumps({"model": "bench", "policies": {"base": {}, "tuned": {}}}))

    # Stage timings: wrap the figure functions and the conversation renderer of one build.
    spent: dict[str, float] = {}

    def timed(name, fn):
        def wrapper(*a, **k):
            t0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - t0
        return wrapper

    for fig in ("rate_bars", "reason_bars", "reward_hists", "learning_curves"):
        setattr(plots, fig, timed("figures", getattr(plots, fig)))
    report.conversation_html = timed("conversations", report.conversation_html)
    report.policy_stats = timed("metrics", report.policy_stats)

    walls, cpus, loads = [], [], []
    for _ in range(args.reps):
        run = load_run(root)  # once outside the timing, for the counts printed below
        spent.clear()
        w0, c0 = time.perf_counter(), time.process_time()
        out = report.write_report(root)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        c0 = time.process_time()
        load_run(root)
        loads.append(time.process_time() - c0)
    improved, regressed = report.flips(run.episodes, pick_pair(run))
    print(f"{len(run.episodes)} episodes ({shard.stat().st_size / 1e6:.1f} MB JSONL), "
          f"{len(improved)} + {len(regressed)} flipped tasks, report {out.stat().st_size / 1e6:.1f} MB")
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"write_report: median wall {wall:.2f} s (min {min(walls):.2f}, max {max(walls):.2f}), "
          f"median CPU {cpu:.2f} s over {args.reps} runs; target {TARGET_S:.0f} s → wall {wall / TARGET_S:.2f}×, "
          f"CPU {cpu / TARGET_S:.2f}× of budget")
    print(f"  CPU by stage (last run): read run {statistics.median(loads):.2f} s, "
          + ", ".join(f"{k} {v:.2f} s" for k, v in spent.items()))
    tmp.cleanup()


if __name__ == "__main__":
    main()
