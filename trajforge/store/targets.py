"""Where a command may write a file the user names: never into a trajectory store.

    from trajforge.store.targets import refuse_store_target
    refuse_store_target(out, source=store)     # raises StoreTargetError (a ValueError) naming why

A store is a folder of ``*.jsonl`` shards read as one (``TrajectoryStore``), plus ``logs/``. An
output written over a shard destroys the episodes in it; a new ``.jsonl`` dropped into the folder
is read back as a shard; a file in ``logs/`` is a collection's event log. So an output path is
refused when it is a shard (by name — ``shard-<n>.jsonl``, ``trajectories.jsonl`` — or by content:
its first line is a trajectory), when it is a store folder, when it lies directly in one or in its
``logs/``, and when it lies anywhere inside the store being read (``source``). Symlinks are
followed first, so a link to a shard is a shard.
"""

from __future__ import annotations

import re
from pathlib import Path

_SHARD_NAME = re.compile(r"^(shard-\d+|trajectories)\.jsonl$")
_TRAJECTORY_KEYS = (b'"task_id"', b'"policy"', b'"toolset_fingerprint"')
_HEAD_BYTES = 64 * 1024
"""How much of a file's first line is read to tell a trajectory (its keys come first)."""


class StoreTargetError(ValueError):
    """An output path that would write into a trajectory store."""


def is_shard(path: Path) -> bool:
    """A file a store reads as a shard: a shard's name, or a first line that is a trajectory."""
    if not path.is_file():
        return False
    if _SHARD_NAME.match(path.name):
        return True
    if path.suffix != ".jsonl":
        return False
    with open(path, "rb") as f:
        head = f.read(_HEAD_BYTES).lstrip().split(b"\n", 1)[0]
    return head.startswith(b"{") and all(key in head for key in _TRAJECTORY_KEYS)


def is_store(folder: Path) -> bool:
    """A folder holding at least one shard."""
    return folder.is_dir() and any(is_shard(p) for p in folder.glob("*.jsonl"))


def refuse_store_target(path: str | Path, source: str | Path | None = None) -> None:
    """Raise ``StoreTargetError`` when writing ``path`` could overwrite or add to a store."""
    out = Path(path).resolve()
    if source is not None:
        src = Path(source).resolve()
        if out == src or src in out.parents:
            raise StoreTargetError(f"{path} is inside the store being read ({source}); write elsewhere")
    if is_shard(out):
        raise StoreTargetError(f"{path} is a trajectory store shard; writing it would destroy the episodes "
                               "in it")
    if is_store(out):
        raise StoreTargetError(f"{path} is a trajectory store folder; write elsewhere")
    parent = out.parent
    if is_store(parent):
        raise StoreTargetError(f"{path} is inside the trajectory store {parent} (a .jsonl there is read "
                               "as a shard); write elsewhere")
    if parent.name == "logs" and is_store(parent.parent):
        raise StoreTargetError(f"{path} is in the event logs of the store {parent.parent}; write elsewhere")
