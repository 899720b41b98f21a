"""``trajforge query``: SQL over a store's ``episodes`` and ``steps`` views.

    trajforge query "SELECT fail_reason, count(*) AS n FROM episodes GROUP BY 1 ORDER BY n DESC" --store store/
    trajforge query "SELECT * FROM steps WHERE len(error_kinds) > 0" --store store/ --format jsonl
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

console = Console()


def query(sql: str = typer.Argument(..., help="SQL over the views `episodes` and `steps`"),
          store: Path = typer.Option(..., help="store directory (or one .jsonl shard)"),
          format: str = typer.Option("table", help="table | jsonl")) -> None:
    """Run SQL over a trajectory store (DuckDB; views `episodes` and `steps`)."""
    from trajforge.store.query import connect, run, unreadable

    if format not in ("table", "jsonl"):
        console.print(f"[red]error:[/red] --format must be table or jsonl, not {format!r}")
        raise typer.Exit(2)
    try:
        con = connect(store)
        try:
            skipped = unreadable(con)  # before the user's SQL, which may drop views
            rows = run(con, sql)
        finally:
            con.close()
    except ValueError as e:
        console.print(f"error: {e}", markup=False, highlight=False)  # DuckDB messages hold [brackets]
        raise typer.Exit(2)
    if skipped:  # on stderr: --format jsonl output stays parseable
        where = ", ".join(f"{name}: {n}" for name, n in skipped.items())
        typer.echo(f"note: skipped {sum(skipped.values())} unreadable lines ({where})", err=True)
    if format == "jsonl":
        for row in rows:
            typer.echo(json.dumps(row, default=str))
        return
    table = Table(*(rows[0].keys() if rows else ()), title=f"{len(rows)} rows")
    for row in rows:
        table.add_row(*(Text("" if v is None else str(v)) for v in row.values()))  # cells are data, not markup
    console.print(table)
