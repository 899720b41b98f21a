"""``trajforge report RUN_DIR``: one self-contained HTML report of a run (no network needed to view).

    trajforge report runs/demo                          # → runs/demo/report.html
    trajforge report runs/x --before base --after dpo --out /tmp/x.html

How a run directory is read (stores, policies, before/after, curves.jsonl): trajforge/eval/rundir.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

console = Console()


def report(run_dir: Path = typer.Argument(..., help="run directory (any directory holding one or more stores)"),
           out: Optional[Path] = typer.Option(None, help="HTML file to write (default RUN_DIR/report.html)"),
           before: Optional[str] = typer.Option(None, help="policy shown as 'before' (default: from metrics.json or the run)"),
           after: Optional[str] = typer.Option(None, help="policy shown as 'after'"),
           title: Optional[str] = typer.Option(None, help="page title")) -> None:
    """Write a self-contained HTML report: before/after metrics, plots, flipped tasks with their episodes."""
    from trajforge.cli.targets import refuse_target
    from trajforge.eval.report import write_report

    refuse_target(out, "--out")  # the default, RUN_DIR/report.html, is the command's own
    try:
        path = write_report(run_dir, out, before=before, after=after, title=title)
    except (ValueError, RuntimeError, OSError) as e:
        console.print(f"error: {e}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    console.print(f"report written to {path}", markup=False, highlight=False, soft_wrap=True)
