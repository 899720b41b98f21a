"""Build the text-to-SQL benchmark, run the template-retrieval baseline, and score a trained agent.

    python -m benchmarks.text2sql --build runs/text2sql
    python -m benchmarks.text2sql --data runs/text2sql --baseline [--split dev]
    python -m benchmarks.text2sql --data runs/text2sql --baseline --agent-store runs/text2sql/eval

``--build OUT`` writes OUT/hospital.sqlite, OUT/questions.jsonl (BYO rows) and OUT/tasks.jsonl
through ``trajforge synth --env sql --db ... --questions ...``, and prints the counts it checked
(and every row synth rejected: none expected). ``--baseline`` prints the baseline's execution
accuracy on the test questions: overall, per tier, seen vs unseen structure. ``--agent-store``
adds a column per policy found in an eval store, over the same questions, with an exact McNemar
p-value against the baseline.

The training run (the lead's; CPU minutes to hours, not part of this script):

    D=runs/text2sql
    python -m benchmarks.text2sql --build $D
    trajforge collect --tasks $D/tasks.jsonl --policy expert --out $D/expert --split train
    trajforge train sft --data $D/expert --out $D/sft                  # add the recipe's flags
    trajforge eval --tasks $D/tasks.jsonl --policy hf:smollm2-135m@$D/sft --name sft \\
        --split test --store $D/eval
    python -m benchmarks.text2sql --data $D --baseline --agent-store $D/eval

(``--split dev`` on ``eval`` and here picks a recipe on dev; the dev split has its own held-out
structures, none of them test's.)
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks.text2sql.build import QUESTIONS, TASKS, build, read_questions
from benchmarks.text2sql.scoring import baseline_outcomes, render, store_outcomes, table

BASELINE = "template baseline"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.text2sql", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__[__doc__.index("The training run"):],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", type=Path, metavar="OUT", help="build database, questions and tasks into OUT")
    ap.add_argument("--data", type=Path, help="a built benchmark folder (default: the --build folder)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline", action="store_true", help="print the template baseline's table")
    ap.add_argument("--agent-store", type=Path, metavar="STORE", help="eval store of policies to score beside it")
    ap.add_argument("--split", default="test", help="the split to score (test, or dev)")
    args = ap.parse_args(argv)
    data = args.data or args.build
    if not (args.build or args.baseline or args.agent_store):
        ap.error("nothing to do: give --build, --baseline or --agent-store")
    if args.build:
        t0 = time.perf_counter()
        report = build(args.build, args.seed)
        for key, value in asdict(report.counts).items():
            print(f"{key:>18}: {value}")
        print(f"{'tasks':>18}: {report.tasks} from {report.counts.questions} rows via trajforge synth, "
              f"{len(report.rejected)} rejected ({time.perf_counter() - t0:.0f}s)")
        for r in report.rejected:
            print(f"  rejected {r.get('source')}: {r.get('reason')} {r.get('detail')}")
    if data is None:
        ap.error("--baseline and --agent-store need --data DIR (or --build OUT)")
    items = read_questions(data / QUESTIONS)
    columns: dict[str, dict[str, float]] = {}
    if args.baseline:
        t0 = time.perf_counter()
        columns[BASELINE] = baseline_outcomes(data / items[0].db, items, args.split)
        print(f"baseline: {len(columns[BASELINE])} {args.split} questions in {time.perf_counter() - t0:.1f}s")
    if args.agent_store:
        agents = store_outcomes(args.agent_store, data / TASKS, items, args.split)
        if not agents:
            print(f"no episode in {args.agent_store} is on a {args.split} question of {data / TASKS}")
        columns.update(agents)
    if columns:
        print(render(table(items, columns, args.split)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
