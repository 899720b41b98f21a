"""trajforge: train tool-using LLM agents end to end. The front door — everything a user needs:

    import trajforge as tf

    tasks = tf.synthesize("sql", n=200, seed=0).tasks
    store = tf.collect([t for t in tasks if t.split == "train"], tf.make_policy("expert"), "runs/x/store")
    tf.train_sft(tf.TrajectoryStore("runs/x/store").read(), "smollm2-135m", "runs/x/adapter", tf.SFTConfig())
    heldout = [t for t in tasks if t.split == "heldout"]
    print(tf.compare(heldout, [tf.make_policy("hf:smollm2-135m@runs/x/adapter", name="tuned")], "runs/x/eval"))

Names, one per concept:

- environments: ``Environment``, ``ToolError``, ``EnvSpec``, ``register_env``, ``make_env``,
  ``env_names``; their data: ``Task``, ``Trajectory``, ``Toolset``, ``ToolCall``, ``Verdict``
- tasks: ``synthesize``, ``mixed_pool``, ``read_tasks``, ``write_tasks``
- policies: ``Policy``, ``make_policy``
- running: ``HarnessConfig``, ``CollectConfig``, ``collect`` (run, grade, store), ``evaluate``
  (metrics of graded trajectories), ``compare`` (several policies, same tasks)
- storing: ``TrajectoryStore``, ``toolset_for`` (a toolset by fingerprint), ``migrate``
- training: ``train_sft`` / ``SFTConfig``, ``train_dpo`` / ``DPOConfig``, ``train_grpo`` /
  ``GRPOConfig`` (need the ``train`` extra; loaded only when used, so ``import trajforge`` never
  imports torch)

Every name is imported on first use, so ``import trajforge`` is cheap. The modules behind these
names are the implementation; their paths may change between minor releases (the 0.1 paths still
work, with a ``DeprecationWarning``, see ``trajforge._compat``).
"""

from __future__ import annotations

import importlib
from typing import Any

from trajforge import _compat
from trajforge._version import __version__

_compat.install()

_NAMES: dict[str, str] = {
    "Environment": "trajforge.envs.base",
    "ToolError": "trajforge.envs.base",
    "EnvSpec": "trajforge.envs.registry",
    "register_env": "trajforge.envs.registry:register",
    "make_env": "trajforge.envs.registry",
    "env_names": "trajforge.envs.registry",
    "Task": "trajforge.schema",
    "Trajectory": "trajforge.schema",
    "Toolset": "trajforge.schema",
    "ToolCall": "trajforge.schema",
    "Verdict": "trajforge.schema",
    "synthesize": "trajforge.tasks",
    "mixed_pool": "trajforge.tasks",
    "read_tasks": "trajforge.tasks.pool",
    "write_tasks": "trajforge.tasks.pool",
    "Policy": "trajforge.policies",
    "make_policy": "trajforge.policies",
    "HarnessConfig": "trajforge.harness.loop",
    "CollectConfig": "trajforge.harness.concurrent",
    "collect": "trajforge.eval.run",
    "compare": "trajforge.eval.run",
    "evaluate": "trajforge.grade.metrics",
    "TrajectoryStore": "trajforge.store.jsonl",
    "toolset_for": "trajforge.envs.toolsets",
    "migrate": "trajforge.store.migrate:migrate_store",
    "train_sft": "trajforge.train.sft",
    "SFTConfig": "trajforge.train.sft",
    "train_dpo": "trajforge.train.dpo",
    "DPOConfig": "trajforge.train.dpo",
    "train_grpo": "trajforge.train.grpo",
    "GRPOConfig": "trajforge.train.grpo",
}
"""Public name → ``module`` (same name there) or ``module:name``."""

__all__ = ["__version__", *sorted(_NAMES)]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'trajforge' has no attribute {name!r}")
    module, _, attr = _NAMES[name].partition(":")
    value = getattr(importlib.import_module(module), attr or name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES})
