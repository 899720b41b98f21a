"""Retrieved demonstrations in training: ``train sft --demos K [--demo-pool STORE|FILE]``.

Each sample's first user message gets the K most similar *other* training tasks above it, in the
block the harness and the server show at evaluation and serving (``harness/demos.py``): the rule
below rewrites the trajectory before the one sequence builder renders it (a rewritten sample is
rendered, its stored token ids no longer describe it). The pool is the training data itself
unless ``--demo-pool`` names another (a store's train split, or a pool file); it is written into
the adapter folder and recorded in its meta by sha256, so the adapter carries what it needs.

    pool = sft_demos(data, cfg, out_dir)           # writes out_dir/demos.jsonl
    builder = SequenceBuilder(..., rules=(DemoRule(pool.demos, toolset_of), ...))

An adapter trained on top of one that was trained with them (``train dpo``, ``train grpo``, a
warm RFT round, ``train_sft(..., init_adapter=)`` without ``demos``) inherits them
(``inherited_demos``): the lower layers of its lineage learnt to read the block, and ``eval`` and
``serve`` load the top adapter's meta, so it trains and is evaluated with the same block rather
than silently without it. A new ``--demos K`` on SFT replaces them; training from the base drops them.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable, NamedTuple

from trajforge.harness.demos import DEMO_FILE, DemoPool, Demos, load_pool
from trajforge.schema import Toolset, Trajectory


class TrainDemos(NamedTuple):
    """The demonstrations a run trains with and what its adapter records about them."""

    demos: Demos
    meta: dict
    """``{"pool": file name in the adapter folder, "sha256", "k", "source"}``."""
    file: str
    """A pool file every process can read now (the harness's ``demo_pool`` for rollouts)."""


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
    if k < 0:  # a slice [:k] would show all but the last -k tasks
        raise ValueError(f"--demos must be 0 or more, not {k}")
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
    return TrainDemos(Demos(pool, k), meta, str(Path(out_dir) / DEMO_FILE))


def inherited_demos(init_adapter: str | Path | None, out_dir: str | Path, write: bool = True) -> TrainDemos | None:
    """The demonstrations ``init_adapter`` was trained with (its meta; the pool checked against the
    recorded hash), its pool copied into ``out_dir`` (``write``: by this process); None when it
    recorded none or there is no starting adapter."""
    from trajforge.policies.hf import ADAPTER_META, read_adapter_meta, trained_demos

    if not init_adapter or not (Path(init_adapter) / ADAPTER_META).is_file():
        return None
    recorded = trained_demos(read_adapter_meta(init_adapter), init_adapter)
    if recorded is None:
        return None
    pool = load_pool(recorded["pool"], recorded["sha256"])
    if write:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(recorded["pool"], Path(out_dir) / DEMO_FILE)
    meta = {"pool": DEMO_FILE, "sha256": recorded["sha256"], "k": recorded["k"],
            "source": f"inherited from {Path(init_adapter).resolve()}", "tasks": len(pool)}
    return TrainDemos(Demos(pool, recorded["k"]), meta, recorded["pool"])
