"""An ``hf:`` policy's evaluation, side by side: one ``generate`` per turn with a full prefill
each turn and no repeat stop (before) against chunked decoding that drops finished rows, KV caches
kept between turns and the repeat stop (after).

    .venv/bin/python benchmarks/hf_eval.py                                  # base model, demo held-out
    .venv/bin/python benchmarks/hf_eval.py --policy hf:smollm2-135m@runs/demo/adapter --out /tmp/hf_eval

The demo's tasks (``synthesize("sql", 260, 0)``, held-out split) in the demo's harness
(``max_consecutive_errors=2``), each arm in its own store, in the order after, before, after
(these machines drift: the ratio uses the mean of the two "after" runs). Prints each run's seconds,
completion and turns, the ratio before/after, and whether the two arms' episodes wrote the same
turns (greedy decoding: they should, up to the turns the repeat stop cut).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from trajforge.eval.run import compare
from trajforge.harness import HarnessConfig
from trajforge.policies import make_policy
from trajforge.store import TrajectoryStore
from trajforge.tasks import synthesize

ARMS = {
    "before": ({"gen_chunk": 0, "keep_turns": False}, {"max_repeats": 10**6}),
    "after": ({}, {}),
}


def run(arm: str, spec: str, tasks, out: Path) -> dict:
    options, harness = ARMS[arm]
    store = out / arm
    shutil.rmtree(store, ignore_errors=True)
    policy = make_policy(spec, name=arm, batch_size=48, **options)
    t0 = time.perf_counter()
    result = compare(tasks, [policy], store, HarnessConfig(max_consecutive_errors=2, **harness))[arm]
    texts = {t.task_id: [s.raw for s in t.steps] for t in TrajectoryStore(store).read()}
    return {"arm": arm, "seconds": round(time.perf_counter() - t0, 1), "completion": result.get("completion"),
            "avg_turns": result.get("avg_turns"), "texts": texts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="hf:smollm2-135m")
    ap.add_argument("--tasks", type=int, default=39, help="first N held-out tasks")
    ap.add_argument("--out", type=Path, default=Path("/tmp/hf_eval"))
    args = ap.parse_args()
    tasks = [t for t in synthesize("sql", 260, 0).tasks if t.split == "heldout"][: args.tasks]
    runs = [run(arm, args.policy, tasks, args.out) for arm in ("after", "before", "after")]
    for r in runs:
        print(json.dumps({k: v for k, v in r.items() if k != "texts"}), flush=True)
    after = (runs[0]["seconds"] + runs[2]["seconds"]) / 2
    before = runs[1]
    # Turns agree up to where the repeat stop cut one arm short: compare each episode's turn texts
    # up to the shorter of the two.
    agree = sum(a[: len(b)] == b[: len(a)] for a, b in
                ((runs[0]["texts"][k], before["texts"][k]) for k in before["texts"]))
    print(json.dumps({"before_over_after": round(before["seconds"] / after, 2),
                      "episodes_with_the_same_turns": f"{agree}/{len(before['texts'])}"}))


if __name__ == "__main__":
    main()
