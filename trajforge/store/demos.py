"""Demonstration pools from stores: a store's solved training tasks as a ``DemoPool``.

    pool = open_pool("store/")            # the store's train-split successes
    pool = open_pool("adapter/")          # the pool an adapter was trained with (its demos.jsonl)
    path = pool_file("store/", workdir)   # the same, as a file the harness can be given

What a pool is and how it is shown: ``trajforge/harness/demos.py``. A store holds episodes of
every split; only its training split goes into a pool, so a block never shows a task of the split
being evaluated.
"""

from __future__ import annotations

from pathlib import Path

from trajforge.harness.demos import DEMO_FILE, DemoPool, load_pool, pool_path
from trajforge.store.jsonl import TrajectoryStore


def is_pool(path: str | Path) -> bool:
    """A pool file, or a folder holding one (an adapter trained with demonstrations)."""
    return pool_path(path).is_file()


def open_pool(path: str | Path, split: str = "train") -> DemoPool:
    """The pool in ``path``: a pool file, an adapter folder's, or a store's ``split`` successes."""
    if is_pool(path):
        return load_pool(path)
    if not Path(path).is_dir():
        raise FileNotFoundError(f"{path}: neither a demonstration pool ({DEMO_FILE}) nor a store")
    pool = DemoPool.from_trajectories(TrajectoryStore(path).read(), split=split)
    if not len(pool):
        raise ValueError(f"store {path} has no successful {split!r} episodes to show as demonstrations")
    return pool


def pool_file(path: str | Path, workdir: str | Path, split: str = "train") -> str:
    """A pool file for ``path``: itself when it is one, else the store's pool written to
    ``workdir``."""
    if is_pool(path):
        return str(pool_path(path))
    out = Path(workdir) / DEMO_FILE
    open_pool(path, split).write(out)
    return str(out)
