"""``trajforge doctor RUN_DIR``: what is wrong with a run, with the numbers and the next thing to try.

    trajforge doctor runs/demo
    trajforge doctor runs/demo --json > diagnosis.json

The rules and their thresholds: trajforge/eval/doctor.py (README "Diagnosing a run").
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

console = Console()
MARK = {"problem": "[red]problem[/red]", "warning": "[yellow]warning[/yellow]", "healthy": "[green]healthy[/green]"}


def _numbers(evidence: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in evidence.items())


def doctor(run_dir: Path = typer.Argument(..., help="run directory (stores, metrics.json, curves.jsonl)"),
           json_out: bool = typer.Option(False, "--json", help="print the diagnosis as JSON")) -> None:
    """Diagnose a run: name what is wrong, with the numbers behind it and the next thing to try."""
    from trajforge.eval.doctor import diagnose

    try:
        diagnosis = diagnose(run_dir)
    except (ValueError, OSError) as e:
        console.print(f"error: {e}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    if json_out:
        typer.echo(json.dumps(diagnosis.model_dump(), indent=1, default=str))
        return
    console.print(f"doctor: {diagnosis.root}" + (f" (subject: {diagnosis.subject})" if diagnosis.subject else ""),
                  markup=False, highlight=False)
    for f in diagnosis.findings:
        where = f" [{f.source}]" if f.source else ""
        console.print(f"{MARK[f.status]} {f.rule}: ", end="", highlight=False)
        console.print(f"{f.title}{where}", markup=False, highlight=False, soft_wrap=True)
        for label, text in (("cause", f.cause), ("numbers", _numbers(f.evidence)), ("next", f.next_step)):
            console.print(f"    {label}: {text}", markup=False, highlight=False, soft_wrap=True)
    skipped = [c for c in diagnosis.checks if c.result == "not checked"]
    if skipped:
        console.print("not checked: " + "; ".join(f"{c.rule} ({c.note})" for c in skipped),
                      markup=False, highlight=False, soft_wrap=True, style="dim")
