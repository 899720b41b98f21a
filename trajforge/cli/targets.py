"""Files a user names on the command line never land in a trajectory store.

    refuse_target(out, "--out", source=store)    # before anything is written

Every command that writes a file or folder the user names (``synth --out/--rejected``,
``eval --json``, ``report --out``, ``demo --json``, ``train sft|dpo|grpo --out``, ``migrate --out``,
and ``export --out`` in its own words) checks it first with ``trajforge.store.targets``: an output
over a shard destroys episodes, and one dropped into a store folder is read back as a shard. The
command then stops with a clear error (exit code 2) and writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import typer


def refuse_target(path: Path | None, flag: str, source: Path | None = None) -> None:
    """Exit with an error naming ``flag`` when writing ``path`` would write into a store (or into
    ``source``, the store the command reads); nothing when ``path`` is None."""
    from trajforge.store.targets import StoreTargetError, refuse_store_target

    if path is None:
        return
    try:
        refuse_store_target(path, source=source)
    except StoreTargetError as e:
        typer.echo(f"error: {flag} {e}", err=True)
        raise typer.Exit(2) from None
