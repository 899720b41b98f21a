"""Query speed on a 10,000-episode store.

    .venv/bin/python benchmarks/query.py [--episodes 10000] [--reps 7]

Runs three real behaviours on the SQL tasks (expert successes, missing-argument failures, no-call
failures), grades them, then writes a store of ``--episodes`` lines by copying those trajectories
under new task ids, and times ``trajforge.store.query.query`` (which opens DuckDB over the shards
each call, as the CLI does) on a filter query. Prints the median of ``--reps`` runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

SQL = "SELECT task_id, policy, turns, n_errors FROM episodes WHERE fail_reason = 'invalid_args' AND tier = 'hard'"


def build_store(root: Path, episodes: int) -> int:
    """Write ``episodes`` lines; returns the number of hard invalid_args episodes written."""
    from trajforge.grade import graded
    from trajforge.harness import HarnessConfig, run_episodes
    from trajforge.policies.expert import ExpertPolicy
    from trajforge.policies.scripted import ScriptedPolicy
    from trajforge.tasks import synthesize

    pool = synthesize("sql", 30, seed=0).tasks
    cfg = HarnessConfig(max_consecutive_errors=2)
    trajs = run_episodes(pool, ExpertPolicy())
    trajs += run_episodes(pool, ScriptedPolicy(['<tool_call>\n{"name": "run_sql", "arguments": {}}\n</tool_call>'],
                                               name="bad-args"), cfg)
    trajs += run_episodes(pool, ScriptedPolicy(["The answer is 3."], name="no-call"), cfg)
    lines = [json.loads(graded(t).model_dump_json(exclude_none=True)) for t in trajs]
    root.mkdir(parents=True, exist_ok=True)
    expected = 0
    with open(root / "trajectories.jsonl", "w") as f:
        for i in range(episodes):
            rec = dict(lines[i % len(lines)], task_id=f"bench-{i:06d}")
            expected += rec["tier"] == "hard" and rec["outcome"].get("fail_reason") == "invalid_args"
            f.write(json.dumps(rec) + "\n")
    return expected


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()

    from trajforge.store.query import query

    root = Path(tempfile.mkdtemp(prefix="trajforge-bench-")) / "store"
    expected = build_store(root, args.episodes)
    size_mb = (root / "trajectories.jsonl").stat().st_size / 1e6
    times, rows = [], []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        rows = query(root, SQL)
        times.append(time.perf_counter() - t0)
    assert len(rows) == expected, (len(rows), expected)
    print(f"{args.episodes} episodes ({size_mb:.1f} MB JSONL), {len(rows)} rows match")
    print(f"filter query median {statistics.median(times) * 1000:.0f} ms over {args.reps} runs "
          f"(min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
