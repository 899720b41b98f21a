"""Files a user names on the command line never land in a trajectory store.

    refuse_target(out, "--out", source=store)    # before anything is written

Every command that writes a file or folder the user names (``synth --out/--rejected``,
``eval --json``, ``report --out``, ``demo --json``, ``train sft|dpo|grpo --out``, ``migrate --out``,
and ``export --out`` in its own words) checks it first with ``trajforge.store.targets``: an output
over a shard destroys episodes, and one dropped into a store folder is read back as a shard. The
command then stops with a clear error (exit code 2) and writes nothing. It stops the same way when
the path cannot be written at all (a file on its way, a folder where a file goes, no permission):
found first, not after the run it would have held. ``refuse_unwritable`` is that check alone, for
a store the command appends to (``collect --out``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import typer


def refuse_target(path: Path | None, flag: str, source: Path | None = None,
                  kind: Literal["file", "folder"] = "file") -> None:
    """Exit with an error naming ``flag`` when writing ``path`` would write into a store (or into
    ``source``, the store the command reads) or cannot be written (``refuse_unwritable``);
    nothing when ``path`` is None."""
    from trajforge.store.targets import StoreTargetError, refuse_store_target

    if path is None:
        return
    try:
        refuse_store_target(path, source=source)
    except StoreTargetError as e:
        _fail(f"{flag} {e}")
    refuse_unwritable(path, flag, kind)


def refuse_unwritable(path: Path, flag: str, kind: Literal["file", "folder"]) -> None:
    """Exit with an error naming ``flag`` when ``path`` cannot be made a ``kind`` (a file, or a
    folder): it is the other kind already, a file stands where a folder on its way must be, or the
    nearest existing folder is not writable. Missing folders are not an error (commands create them)."""
    if path.is_dir():
        if kind == "file":
            _fail(f"{flag} {path} is a folder; name a file")
        holder = path
    else:
        if path.exists() and kind == "folder":
            _fail(f"{flag} {path} is a file; name a folder")
        holder = next(p for p in path.absolute().parents if p.exists())
        if not holder.is_dir():
            _fail(f"{flag} {path}: {holder} is a file, not a folder")
    if not os.access(holder, os.W_OK):
        _fail(f"{flag} {path}: no permission to write in {holder}")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2) from None
