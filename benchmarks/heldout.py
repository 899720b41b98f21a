"""Any adapter on ``benchmarks/recipes.py``'s held-out split, paired against another run there.

    .venv/bin/python benchmarks/heldout.py runs/demo/adapter --out /tmp/h_demo [--seed 0] [--dbs 0,1]
        [--against /tmp/h_old]

The held-out questions of ``--dbs`` (``generator(db).heldout_space(seed)``: 186 tasks on databases
0 and 1, 183 on 2 and 3, which no recipe was ever looked at on), answered greedily in the demo's
harness (``recipes.greedy_episodes``) into OUT: completion with its 95% Wilson interval, the
first-error and recovery rates, solved/tasks per template, and with ``--against STORE`` (another
adapter's OUT on the same tasks) the exact McNemar p over them. This is how an adapter trained
outside ``recipes.py`` — ``trajforge demo``'s, say — is compared with the recipes' table: 39
held-out tasks cannot tell 5 points from noise. A store already in OUT is resumed, not redone.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from recipes import by_template, greedy_episodes  # noqa: E402  (a script beside it, not a package)


def main(argv: list[str] | None = None) -> dict:
    from trajforge.envs.sql.tasks import generator
    from trajforge.grade.metrics import evaluate, paired_p
    from trajforge.policies import make_policy
    from trajforge.store import TrajectoryStore

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("adapter", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="the episodes' store (resumed when there)")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--seed", type=int, default=0, help="the held-out draw (recipes.py --seed)")
    ap.add_argument("--dbs", default="0,1", help="databases whose held-out questions are asked")
    ap.add_argument("--against", type=Path, help="another adapter's OUT on the same tasks: paired test")
    args = ap.parse_args(argv)

    tasks = [t for db in args.dbs.split(",") for t in generator(int(db)).heldout_space(args.seed).tasks]
    policy = make_policy(f"hf:{args.model}@{args.adapter}", name="heldout", batch_size=48)
    episodes = greedy_episodes(policy, tasks, args.out)
    m = evaluate(episodes)
    solved = {t.task_id for t in episodes if t.outcome and t.outcome.correct}
    result = {"adapter": str(args.adapter), "n": m["n"], "completion": m["completion"], "ci95": m["completion_ci95"],
              "first_error_rate": m["first_error_rate"], "recovery": m["recovery"],
              "by_template": by_template(tasks, solved)}
    if args.against:
        ids = {t.id for t in tasks}
        theirs = {t.task_id for t in TrajectoryStore(args.against).read()
                  if t.task_id in ids and t.outcome and t.outcome.correct}
        fixed, broke = len(solved - theirs), len(theirs - solved)
        result["against"] = {"store": str(args.against), "solved": len(theirs), "fixed": fixed, "broke": broke,
                             "p": paired_p(fixed, broke)}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
