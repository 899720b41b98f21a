"""``trajforge export`` and ``trajforge import-openai``: move trajectories to and from other tools.

    trajforge export store/ --format openai --out train.jsonl       # OpenAI chat fine-tuning JSONL
    trajforge export store/ --format sharegpt --out lf_data/        # LLaMA-Factory file + dataset_info.json
    trajforge export store/ --format hf --out ds/                   # datasets.save_to_disk (or ds.parquet)
    trajforge export store/ --format openai --out fix.jsonl --where fail_reason=no_such_column,retrieval_miss
    trajforge import-openai train.jsonl --env sql --out store/
"""

from __future__ import annotations

from pathlib import Path

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
                                           "fields: fail_reason, outcome_tier, tier, env, split, policy, task_id; "
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
    everything = TrajectoryStore(store).read()
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
                  policy: str = typer.Option("imported", help="policy name recorded on the trajectories")) -> None:
    """Import OpenAI chat JSONL as unexecuted trajectories (calls validated against the env toolset).

    Lines that cannot be read are listed (file:line: what) and the command exits 1; the others are
    imported all the same (importing the file again after a fix adds no duplicates: a record's key is
    its file and line)."""
    from trajforge.store import TrajectoryStore
    from trajforge.store.export import read_openai_jsonl

    try:
        trajs, rejected = read_openai_jsonl(file, env=env, policy=policy)
    except (OSError, ValueError, KeyError) as e:
        _fail(str(e))
    st = TrajectoryStore(out)
    for t in trajs:
        st.append(t)
    errors = sum(len(s.errors) for t in trajs for s in t.steps)
    console.print(f"imported {len(trajs)} trajectories into {out} ({errors} invalid calls recorded as errors)",
                  markup=False, highlight=False)
    for line in rejected[:MAX_SHOWN]:
        console.print(f"error: {line}", markup=False, highlight=False, soft_wrap=True)
    if rejected:
        more = f" ({len(rejected) - MAX_SHOWN} more not shown)" if len(rejected) > MAX_SHOWN else ""
        console.print(f"{len(rejected)} lines of {file} could not be read{more}", markup=False, highlight=False)
        raise typer.Exit(1)
