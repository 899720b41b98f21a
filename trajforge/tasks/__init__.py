"""Task pools: what is generic about them. Each environment's own generators live in its folder.

``synthesize(env, n, seed)`` runs the template generator of ``env``'s ``EnvSpec`` (built on the
skeleton in ``tasks.templates``); ``tasks.llm`` has an LLM write tasks for any environment;
``tasks.worlds`` draws the train split across several worlds; ``tasks.verify`` is the contract every synthesized task meets (executed, verified by replay);
``tasks.pool`` reads and writes pools (with the toolsets their tasks were made with, beside
them); ``tasks.splits``, ``tasks.dedup``, ``tasks.tiering`` and ``tasks.mixed`` work on any pool.
"""

from __future__ import annotations

import warnings
from typing import Sequence

from trajforge.tasks.pool import Rejection, SynthReport, read_tasks, write_tasks


def synthesize(env: str, n: int, seed: int = 0, worlds: int = 1, world_train: int = 0,
               rephrasings: int = 0, compose: int = 0, compose_templates: Sequence[str] = ()) -> SynthReport:
    """Generate ``n`` verified tasks for environment ``env`` (split train/test/heldout).

    ``worlds`` > 1 draws the train split across that many worlds of the environment (renamed
    entities; ``tasks.worlds``); test and held-out stay in world 0. ``world_train`` > 0 keeps world
    0's whole pool of ``n`` and adds that many train tasks from each other world instead.
    ``compose`` > 0 adds that many train tasks of the environment's composition templates
    (``EnvSpec.compose``) after the pool's own train tasks; ``compose_templates``: those template
    ids only (all when empty).
    ``rephrasings`` > 0 adds that many reworded copies of each train task (``tasks.rephrase``)."""
    if compose_templates and not compose:  # else the choice would be dropped without a word
        raise ValueError("compose_templates chooses the templates compose draws from: give compose > 0 with it")
    report = _generate(env, n, seed, worlds, world_train)
    if compose:
        report = _with_compose(env, report, compose, seed, tuple(compose_templates))
    if not rephrasings:
        return report
    from trajforge.tasks.rephrase import with_rephrasings

    return report.model_copy(update={"tasks": with_rephrasings(report.tasks, rephrasings)})


def _with_compose(env: str, report: SynthReport, n: int, seed: int, only: tuple[str, ...]) -> SynthReport:
    """``report`` with ``n`` composition train tasks after its own train tasks (splits stay grouped)."""
    from trajforge.envs import env_spec

    spec = env_spec(env)
    if spec.compose is None:
        raise ValueError(f"environment {env!r} has no composition templates; leave compose at 0")
    more = spec.compose(n, seed, only=only)
    tasks = report.tasks
    train = [t for t in tasks if t.split == "train"]
    dropped = dict(report.dropped)
    for reason, count in more.dropped.items():
        dropped[f"compose_{reason}"] = dropped.get(f"compose_{reason}", 0) + count
    return report.model_copy(update={"tasks": train + more.tasks + [t for t in tasks if t.split != "train"],
                                     "dropped": dropped})


def _generate(env: str, n: int, seed: int, worlds: int, world_train: int) -> SynthReport:
    from trajforge.envs import env_spec

    try:
        spec = env_spec(env)
    except KeyError as e:
        raise ValueError(f"no task generator for environment {env!r}: {e.args[0]}") from None
    if spec.generate is None:
        raise ValueError(f"no task generator for environment {env!r}: its tasks come from an LLM "
                         "(trajforge synth --llm) or a file")
    if worlds == 1:
        if world_train:
            raise ValueError("world_train adds tasks from worlds > 0: give worlds > 1 with it")
        return spec.generate(n, seed)
    if spec.world_generator is None:
        raise ValueError(f"environment {env!r} has no worlds; leave worlds at 1")
    from trajforge.tasks.worlds import across_worlds

    return across_worlds(spec.world_generator, n, seed, worlds, world_train)


def mixed_pool(specs: dict[str, int], seed: int = 0) -> SynthReport:
    """``specs[env]`` verified tasks per environment, merged into one pool (``tasks.mixed``)."""
    from trajforge.tasks.mixed import mixed_pool as build

    return build(specs, seed)


__all__ = ["Rejection", "SynthReport", "mixed_pool", "read_tasks", "synthesize", "write_tasks"]


def __getattr__(name: str):
    if name != "GENERATORS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # 0.1's table of generators by environment; each EnvSpec holds its own now.
    warnings.warn("trajforge.tasks.GENERATORS is deprecated and will be removed in trajforge 0.3; use "
                  "trajforge.envs.env_spec(name).generate", DeprecationWarning, stacklevel=2)
    from trajforge.envs import env_names, env_spec

    return {n: env_spec(n).generate for n in env_names() if env_spec(n).generate is not None}
