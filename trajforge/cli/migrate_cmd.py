"""``trajforge migrate``: bring a store (or an adapter) to the current tool schema.

    trajforge migrate store/ --out store-v2/                                  # fingerprints only
    trajforge migrate store/ --out store-v2/ --tasks tasks.jsonl --rename-arg run_sql.query=sql
    trajforge migrate store/ --out store-v2/ --tasks tasks.jsonl --mapping change.toml
    trajforge migrate --adapter runs/demo/adapter

Rewrites the stored calls by the mapping, re-executes every rewritten trajectory in the current
environment (the tasks come from ``--tasks``), keeps those whose results and verdict still hold,
and writes a new store with the new fingerprint plus ``migration.json``: records, relabelled,
migrated, re-verified and dropped per reason (``trajforge.store.migrate``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trajforge.cli.targets import refuse_target


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def migrate(
    store: Optional[Path] = typer.Argument(None, help="store directory to migrate"),
    out: Optional[Path] = typer.Option(None, help="new store directory (must not hold records)"),
    tasks: Optional[Path] = typer.Option(None, help="task pool the trajectories ran on (needed to re-execute)"),
    mapping: Optional[Path] = typer.Option(None, help="the schema change as a TOML or JSON file"),
    rename_tool: list[str] = typer.Option([], help="OLD=NEW (repeatable)"),
    rename_arg: list[str] = typer.Option([], help="TOOL.OLD=NEW (repeatable)"),
    drop_arg: list[str] = typer.Option([], help="TOOL.ARG (repeatable)"),
    default: list[str] = typer.Option([], help="TOOL.ARG=JSON value for calls that lack it (repeatable)"),
    env: Optional[str] = typer.Option(None, help="only migrate this environment's records"),
    adapter: Optional[Path] = typer.Option(None, help="migrate this adapter's recorded fingerprint instead"),
) -> None:
    """Migrate a store's trajectories (or an adapter) to the current tool schema."""
    from trajforge.store.migrate import Migration, migrate_adapter, migrate_store

    if adapter is not None:
        if store is not None:
            _fail("give either a STORE or --adapter, not both")
        try:
            done = migrate_adapter(adapter, env)
        except (ValueError, KeyError) as e:
            _fail(str(e).strip("'\""))
        change = "unchanged" if done["old"] == done["new"] else f"{done['old']} -> {done['new']}"
        typer.echo(f"adapter {adapter} ({done['env']}): toolset fingerprint {change}")
        return
    if store is None or out is None:
        _fail("give the STORE to migrate and --out NEW_STORE (or --adapter DIR)")
    refuse_target(out, "--out", source=store, kind="folder")
    flags = any((rename_tool, rename_arg, drop_arg, default))
    if mapping and flags:
        _fail("give the change either as --mapping FILE or as flags, not both")
    try:
        change = (Migration.read(mapping) if mapping
                  else Migration.from_flags(rename_tool, rename_arg, drop_arg, default))
        if env is not None:
            change = change.model_copy(update={"env": env})
        pool = _tasks(tasks) if tasks else {}
        report = migrate_store(store, out, change, pool)
    except (ValueError, KeyError, OSError) as e:
        _fail(str(e).strip("'\""))
    typer.echo(f"{report.records} records: {report.relabelled} relabelled (fingerprint only), "
               f"{report.migrated} migrated, {report.reverified} re-verified, "
               f"{sum(report.dropped.values())} dropped {report.dropped or ''}".rstrip())
    for old, new in sorted(report.fingerprints.items()):
        typer.echo(f"toolset {old} -> {new}")
    typer.echo(f"wrote {report.kept} records to {out} (report: {out}/migration.json)")


def _tasks(path: Path) -> dict:
    from trajforge.tasks.pool import read_tasks

    return {t.id: t for t in read_tasks(path)}
