"""Retrieved demonstrations in training: ``train sft --demos K [--demo-pool STORE|FILE]``.

Each sample's first user message gets the K most similar *other* training tasks above it, in the
block the harness and the server show at evaluation and serving (``harness/demos.py``): the rule
below rewrites the trajectory before the one sequence builder renders it (a rewritten sample is
rendered, its stored token ids no longer describe it). The pool is the training data itself
unless ``--demo-pool`` names another (a store's train split, or a pool file); it is written into
the adapter folder and recorded in its meta by sha256, so the adapter carries what it needs.

    pool = sft_demos(data, cfg, out_dir)           # writes out_dir/demos.jsonl
    builder = SequenceBuilder(..., rules=(DemoRule(pool.demos, toolset_of), ...))
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, NamedTuple

from trajforge.harness.demos import DEMO_FILE, DemoPool, Demos
from trajforge.schema import Toolset, Trajectory


class TrainDemos(NamedTuple):
    """The demonstrations a run trains with and what its adapter records about them."""

    demos: Demos
    meta: dict
    """``{"pool": file name in the adapter folder, "sha256", "k", "source"}``."""


class DemoRule:
    """Render rule: the trajectory with its first user message shown with its block (the same
    trajectory object when the block changes nothing, so stored ids still count)."""

    def __init__(self, demos: Demos, toolset_of: Callable[[Trajectory], Toolset]):
        self.demos, self.toolset_of = demos, toolset_of

    def __call__(self, traj: Trajectory) -> Trajectory:
        messages = self.demos.in_messages(traj.messages, traj.task_id, self.toolset_of(traj).names)
        return traj if messages is traj.messages else traj.model_copy(update={"messages": messages})


def sft_demos(data: list[Trajectory], k: int, source: str | None, out_dir: str | Path,
              write: bool = True) -> TrainDemos:
    """The pool ``k`` demonstrations come from — ``source`` (a store's train split or a pool
    file; ``store/demos.py``), else the training data's successes — written into ``out_dir``
    (``write``: by this process; the others of a distributed run only read it)."""
    if source is None:
        pool = DemoPool.from_trajectories(data)
    else:
        from trajforge.store.demos import open_pool

        pool = open_pool(source)
    if not len(pool):
        raise ValueError("no solved task to show as a demonstration (the pool is empty)")
    if write:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        pool.write(Path(out_dir) / DEMO_FILE)
    sha = pool.sha256()
    meta = {"pool": DEMO_FILE, "sha256": sha, "k": k, "source": str(source) if source else "training data",
            "tasks": len(pool)}
    return TrainDemos(Demos(pool, k), meta)
