"""``trajforge view STORE``: browse a store's episodes in a local web page (127.0.0.1 only).

    trajforge view runs/demo/eval_store               # prints the URL; Ctrl-C stops it
    trajforge view store/ --port 8765
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

console = Console()


def _fail(msg: str) -> None:
    console.print(f"error: {msg}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def view(store: Path = typer.Argument(..., help="store directory (or one .jsonl shard)"),
         port: int = typer.Option(8765, min=0, max=65535, help="port on 127.0.0.1 (0: any free port)"),
         verbose: bool = typer.Option(False, help="log every request")) -> None:
    """Serve a filterable episode viewer for a store on 127.0.0.1."""
    from trajforge.eval.rundir import find_shards
    from trajforge.eval.viewer import make_server

    if not store.exists():
        _fail(f"store {store} does not exist")
    shards = find_shards(store)
    if not any(p == store or p.parent == store for p in shards):
        found = sorted({str(p.parent) for p in shards})
        hint = f"; stores under it: {', '.join(found)}" if found else ""
        _fail(f"{store} holds no trajectory shards (*.jsonl lines with task_id, policy, toolset_fingerprint){hint}")
    try:
        server = make_server(store, port, verbose=verbose)
    except (ValueError, OSError) as e:
        _fail(str(e))
    console.print(f"viewing {store} at {server.url} (Ctrl-C to stop)", markup=False, highlight=False, soft_wrap=True)
    skipped = server.catalog.snapshot().unreadable
    if skipped:
        where = ", ".join(f"{name}: {n}" for name, n in skipped.items())
        console.print(f"note: skipped {sum(skipped.values())} unreadable lines ({where})", markup=False,
                      highlight=False, soft_wrap=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
