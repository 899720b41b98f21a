"""``trajforge export`` and ``trajforge import-openai``: move trajectories to and from other tools.

    trajforge export store/ --format openai --out train.jsonl       # OpenAI chat fine-tuning JSONL
    trajforge export store/ --format sharegpt --out lf_data/        # LLaMA-Factory file + dataset_info.json
    trajforge export store/ --format hf --out ds/                   # datasets.save_to_disk (or ds.parquet)
    trajforge export store/ --format openai --out fix.jsonl --where fail_reason=no_such_column,retrieval_miss
    trajforge import-openai train.jsonl --env sql --out store/
    trajforge import-openai chats.jsonl --env sql --out store/ --execute --tasks pool.jsonl   # replayed, graded
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

console = Console()
FORMATS = ("openai", "sharegpt", "hf")
MAX_SHOWN = 20
"""Unreadable import lines listed one by one."""


def _fail(msg: str) -> None:
    console.print(f"error: {msg}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def export(store: Path = typer.Argument(..., help="store directory"),
           format: str = typer.Option(..., help="openai | sharegpt | hf"),
           out: Path = typer.Option(..., help="file (openai; hf if it ends in .parquet) or folder"),
           where: list[str] = typer.Option([], help="only trajectories with field=value[,value] (or field!=...); "
                                           "fields: fail_reason, outcome_tier, guessed, tier, env, split, policy, task_id; "
                                           "repeat to require several")) -> None:
    """Export a store's trajectories to OpenAI JSONL, ShareGPT (LLaMA-Factory) or a HF dataset."""
    from trajforge.store import TrajectoryStore
    from trajforge.store import export as ex
    from trajforge.store.filters import filter_trajectories, parse_where
    from trajforge.store.targets import StoreTargetError, refuse_store_target

    if format not in FORMATS:
        _fail(f"--format must be one of {', '.join(FORMATS)}, not {format!r}")
    try:
        selected = parse_where(where)
        refuse_store_target(out, source=store)
    except ValueError as e:  # StoreTargetError is one
        _fail(f"--out {e}" if isinstance(e, StoreTargetError) else str(e))
    st = TrajectoryStore(store)
    everything = st.read()
    _say_unreadable(st.torn)
    if not everything:
        _fail(f"no trajectories in {store}")
    trajs = filter_trajectories(everything, selected)
    if not trajs:
        _fail(f"no trajectory in {store} matches --where {selected}; {_held(everything, selected)}")
    try:
        if format == "openai":
            ex.write_openai_jsonl(trajs, out)
            written = out
        elif format == "sharegpt":
            written = ex.write_sharegpt(trajs, out)
        else:
            written = ex.save_hf(trajs, out)
    except (OSError, ValueError, KeyError) as e:  # the existing output is untouched: files are swapped in whole
        _fail(str(e))
    chosen = f" of {len(everything)} (--where {selected})" if selected.clauses else ""
    console.print(f"exported {len(trajs)}{chosen} trajectories as {format} to {written}", markup=False,
                  highlight=False)
    _say_masked(ex.unlearned_turns(trajs), format)


def _say_unreadable(torn: list[str]) -> None:
    """The store lines the read skipped (torn by a crash, not a trajectory): said, never silent."""
    if torn:
        more = f" and {len(torn) - MAX_SHOWN} more" if len(torn) > MAX_SHOWN else ""
        console.print(f"note: skipped {len(torn)} unreadable lines ({', '.join(torn[:MAX_SHOWN])}{more})",
                      markup=False, highlight=False, soft_wrap=True)


def _say_masked(masked: int, format: str) -> None:
    """How the turns trajforge trains with loss 0 went out: weighted 0, or (ShareGPT) not at all."""
    if not masked:
        return
    if format == "sharegpt":
        msg = (f"warning: {masked} assistant turns that trajforge trains with loss 0 (self-repair mistakes, "
               "failed turns of recovered episodes) are ordinary turns here: ShareGPT has no per-turn weight, "
               "so LLaMA-Factory would train on them (--format openai or hf keeps them at weight 0)")
    else:
        msg = f"{masked} assistant turns carry weight 0 (trajforge trains them with loss 0)"
    console.print(msg, markup=False, highlight=False, soft_wrap=True)


def _held(trajs, selected) -> str:
    """What the store does hold, for each field the filter named: the way to fix a typo."""
    from trajforge.store.filters import held_values

    parts = []
    for field in dict.fromkeys(c.field for c in selected.clauses):
        counts = held_values(trajs, field).most_common(12)
        parts.append(f"{field} values there: " + ", ".join(f"{v} ({n})" for v, n in counts))
    return "; ".join(parts)


def import_openai(file: Path = typer.Argument(..., help="OpenAI chat fine-tuning JSONL"),
                  env: str = typer.Option(..., help="environment whose toolset the calls use"),
                  out: Path = typer.Option(..., help="store directory to append to"),
                  policy: str = typer.Option("imported", help="policy name recorded on the trajectories"),
                  execute: bool = typer.Option(False, "--execute", help="replay each conversation's calls "
                                               "in the environment on its task (--tasks), grade it and "
                                               "store it as trainable data"),
                  tasks: Optional[Path] = typer.Option(None, help="task pool the conversations are "
                                                       "about (for --execute)")) -> None:
    """Import OpenAI chat JSONL as unexecuted trajectories (calls validated against the env toolset),
    or with --execute as executed, graded ones (results from the environment, not the file).

    Lines that cannot be read are listed (file:line: what) and the command exits 1; the others are
    imported all the same (importing the file again after a fix adds no duplicates: a record's key is
    its file and line). Conversations --execute cannot replay are counted and listed by reason."""
    from trajforge.cli.targets import refuse_unwritable
    from trajforge.store import TrajectoryStore
    from trajforge.store.export import read_openai_jsonl

    if execute != (tasks is not None):
        _fail("--execute needs --tasks POOL (the tasks the conversations are about), and --tasks is only for --execute")
    refuse_unwritable(out, "--out", "folder")
    try:
        trajs, rejected = read_openai_jsonl(file, env=env, policy=policy)
    except (OSError, ValueError, KeyError) as e:
        _fail(str(e))
    st = TrajectoryStore(out)
    if execute:
        _execute(trajs, tasks, env, policy, st, out)
    else:
        for t in trajs:
            st.append(t)
        errors = sum(len(s.errors) for t in trajs for s in t.steps)
        console.print(f"imported {len(trajs)} trajectories into {out} ({errors} invalid calls recorded as errors)",
                      markup=False, highlight=False)
    _print_unreadable(file, rejected)


def _execute(trajs, tasks: Path, env: str, policy: str, st, out: Path) -> None:
    """Replay, grade and store the conversations; print what became of each, counted."""
    from trajforge.cli.main import _load_tasks
    from trajforge.grade import graded
    from trajforge.store.execute import execute_imported

    run = execute_imported(trajs, _load_tasks(tasks, None), env=env, policy=policy)
    tiers: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    with st.writer() as shard:
        for t in run.trajectories:
            g = graded(t)
            shard.append(g)
            tiers[g.outcome.tier] += 1
            if g.outcome.fail_reason and not g.outcome.correct:
                reasons[g.outcome.fail_reason] += 1
    failed = f" ({_counts(reasons)})" if reasons else ""
    console.print(f"executed {len(run.trajectories)} of {len(trajs)} conversations into {out}: "
                  f"{_counts(tiers, ('success', 'recovered', 'failed'))}{failed}; environment results differed "
                  f"from the file's in {run.diverged}", markup=False, highlight=False, soft_wrap=True)
    if run.skipped:
        console.print(f"not executed: {_counts(Counter(s.reason for s in run.skipped))}",
                      markup=False, highlight=False)
        for s in run.skipped[:MAX_SHOWN]:
            console.print(f"  {s.source}: {s.reason}: {s.detail}", markup=False, highlight=False, soft_wrap=True)


def _counts(counts: Counter[str], order: tuple[str, ...] = ()) -> str:
    keys = [k for k in order if k in counts] + sorted(k for k in counts if k not in order)
    return ", ".join(f"{k} {counts[k]}" for k in keys) or "none"


def _print_unreadable(file: Path, rejected: list[str]) -> None:
    for line in rejected[:MAX_SHOWN]:
        console.print(f"error: {line}", markup=False, highlight=False, soft_wrap=True)
    if rejected:
        more = f" ({len(rejected) - MAX_SHOWN} more not shown)" if len(rejected) > MAX_SHOWN else ""
        console.print(f"{len(rejected)} lines of {file} could not be read{more}", markup=False, highlight=False)
        raise typer.Exit(1)
