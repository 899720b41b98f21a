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
    trajforge doctor runs/demo
"""

from __future__ import annotations

import json
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

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
from trajforge.cli import spread
from trajforge.cli import report_cmd
from trajforge.cli import view_cmd
from trajforge.cli import migrate_cmd
from trajforge.cli import doctor_cmd
from trajforge.cli import plan_cmd
from trajforge.cli.options import with_configs
from trajforge.cli.rewards import MILESTONE_BONUS, REWARD_WEIGHTS, REWARDS, with_reward_flags
from trajforge.grade.reward import RewardConfig
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

    try:
        path = pull(name, force=force)
    except KeyError as e:  # not an embedded model: nothing is downloaded
        _fail(str(e.args[0]))
    console.print(f"model ready at {path}")


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


def _policy(spec: str, name: Optional[str] = None, temperature: float = 0.0, device: Optional[str] = None):
    from trajforge.policies import make_policy

    opts = {"temperature": temperature} if spec != "expert" else {}
    if device and spec.startswith("hf:"):
        opts["device"] = device
    try:
        return make_policy(spec, name=name, **opts)
    except (ValueError, FileNotFoundError, OSError) as e:
        _fail(str(e))


@contextmanager
def _demo_harness(harness: HarnessConfig) -> Iterator[HarnessConfig]:
    """``--demo-pool`` made a pool file the harness reads: a store's train-split successes are
    written to a temporary pool, removed when the command ends; a missing or empty one is a
    clear error."""
    if harness.demo_pool is None or harness.demos == 0:
        yield harness
        return
    from trajforge.store.demos import pool_file

    with tempfile.TemporaryDirectory(prefix="trajforge-demos-") as workdir:
        try:
            path = pool_file(harness.demo_pool, workdir, ROLES.train)
        except (OSError, ValueError) as e:
            _fail(f"--demo-pool: {e}")
        yield harness.model_copy(update={"demo_pool": path})


def _check_demos(harness: HarnessConfig, policies: list) -> None:
    """Each policy's demonstrations can be shown: a pool is named or recorded, and unchanged."""
    from trajforge.harness.demos import episode_demos

    for pol in policies:
        try:
            episode_demos(harness, pol)
        except (OSError, ValueError) as e:
            _fail(f"{pol.name}: {e}")


@app.command()
@with_configs(config_file=True, rewards=REWARDS)
def grade(store: Path = typer.Argument(...), reward_weights: list[str] = REWARD_WEIGHTS,
          milestone_bonus: list[str] = MILESTONE_BONUS, rewards: RewardConfig = None) -> None:
    """(Re)grade every trajectory in a store in place and print the outcome counts."""
    from trajforge.grade import graded
    from trajforge.store import ShardBusy, TrajectoryStore

    rewards = with_reward_flags(rewards, reward_weights, milestone_bonus)
    st = TrajectoryStore(store)
    trajs = [graded(t, rewards) for t in st]
    if not trajs:
        _fail(f"no trajectories in {store}")
    try:
        st.rewrite(trajs)
    except ShardBusy as e:  # a running collection still appends: grade when it has finished
        _fail(f"{e}; grade it after the collection finishes (nothing was changed)")
    if st.torn:  # the rewrite holds what could be read: a line that held no record is gone, said so
        shown = ", ".join(st.torn[:5]) + (f" and {len(st.torn) - 5} more" if len(st.torn) > 5 else "")
        console.print(f"note: left out {len(st.torn)} unreadable lines ({shown})", markup=False, highlight=False)
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
             store: Optional[Path] = None, device: Optional[str] = spread.DEVICE,
             processes: int = spread.PROCESSES, shard: str = spread.SHARD,
             report: Optional[Path] = spread.REPORT, harness: HarnessConfig = None) -> None:
    """Evaluate policies on the same tasks in the same harness."""
    from trajforge.eval.run import collect, compare
    from trajforge.eval.table import rich_table
    from trajforge.harness import sampling_of

    refuse_target(json_out, "--json", source=store)
    part = spread.parse_slice(shard)
    whole = _load_tasks(tasks, split)
    pool = part.of(whole)
    # Without --store the episodes only feed the metrics: a scratch store removed on the way out
    # (each such run used to leave its episodes in the temp folder for good), as is --demo-pool's file.
    with _demo_harness(harness) as harness, _store_or_scratch(store) as store:
        which = f"split {split!r}" if split else f"all splits ({_split_counts(whole)})"
        sliced = f" (shard {part}: {len(pool)} of {len(whole)})" if part.count > 1 else ""
        console.print(f"evaluating {which}: {len(pool)} task{'' if len(pool) == 1 else 's'}{sliced} from {tasks}",
                      highlight=False, markup=False,
                      soft_wrap=True)
        if processes > 1:
            results = _eval_spread(pool, part, processes, store)
        else:
            pols = [_policy(spec, name[i] if i < len(name) else None, device=device) for i, spec in enumerate(policy)]
            _check_demos(harness, pols)
            if report:  # a worker of --processes collects its slice; the parent computes the metrics
                new = [t for p in pols
                       for t in collect(pool, p, store, harness=harness, show_progress=False, first_shard=part.index)]
                spread.write_report(report, spread.WorkerReport(slice=str(part), device=spread.device_of(pols),
                                                                new=len(new), tiers=spread.tally(new),
                                                                policies=[p.name for p in pols],
                                                                sampling={p.name: sampling_of(p) for p in pols}))
                return
            results = compare(pool, pols, store, harness=harness)
        console.print(rich_table(results, title=f"{split or 'all'} split ({len(pool)} tasks)"))
        if json_out:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(results, indent=2))
            console.print(f"metrics written to {json_out}")


@contextmanager
def _store_or_scratch(store: Optional[Path]) -> Iterator[Path]:
    if store is not None:
        yield store
        return
    with tempfile.TemporaryDirectory(prefix="trajforge-eval-") as scratch:
        yield Path(scratch)


def _eval_spread(pool: list, part, processes: int, store: Path) -> dict:
    """``eval --processes N``: N workers collect their slices into one store; the metrics come
    from it as in a one-process run."""
    from trajforge.eval.run import metrics_of

    argv = spread.without_options(spread.command_line("eval"), valued=(*spread.SPREAD_OPTIONS, "--json", "--store"))
    reports = spread.spread([*argv, "--store", str(store)], spread.worker_slices(part, processes, len(pool)), store)
    try:  # the workers' sampling: the run they collected, not another one the store holds
        return metrics_of(store, pool, reports[0].policies, reports[0].sampling)
    except ValueError as e:
        _fail(str(e))


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
app.command("doctor")(doctor_cmd.doctor)
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
