"""Task pools drawn across worlds: the train split from worlds 0..K-1, test and held-out from world 0.

A *world* is a seeded variant of an environment's catalog (``envs/<name>/worlds.py``): the entity
vocabularies renamed from larger pools of realistic names (SQL's schema worlds rename tables and
columns too), the data drawn again. World 0 is the original. A model trained on one world
memorises its names (``WHERE name = 'Garden'`` for a category); trained across several, it has to
read the entities off the question and the schema, which is what the held-out split asks of it.

    report = across_worlds(sql_generator, n=260, seed=0, worlds=4)                  # 182 train, spread
    report = across_worlds(sql_generator, n=260, seed=0, worlds=4, world_train=61)  # 182 + 3 × 61

``generator_for(world)`` is the environment's ``TemplateGenerator`` for one world
(``EnvSpec.world_generator``). The split sizes are those of ``n`` (``split_sizes``); the train
share is spread evenly over the worlds (world 0 takes the remainder), or, with ``world_train``,
world 0 keeps its whole split — exactly the pool ``generator_for(0)(n, seed)`` draws, every
id the same — and each other world adds ``world_train`` train tasks to it. Each world's draw on the
same random stream and the same duplicate set, in order: world 0's train and test (as one draw,
so a test task is never a train task), world 0's held-out, then worlds 1..K-1's train. Test and
held-out stay in world 0, so they measure exactly what they measure without worlds. A task of a
world > 0 whose prompt or reference plan repeats one drawn before (``tasks.dedup``: the same
question about a city two worlds share), or that is a test or held-out task's template with its
entities (code's worlds rename only the function), is dropped as a duplicate and another drawn, so
no question of the test split reappears in training. Only the
train draw of a world > 0 happens, so its ``heldout_only`` templates never enter it; that its
vocabularies hold no held-out value is each world builder's promise, and
``tests/tasks/test_worlds.py`` checks it for every environment.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from trajforge.schema import Task
from trajforge.tasks.dedup import Deduper
from trajforge.tasks.pool import SynthReport
from trajforge.tasks.templates import TemplateGenerator, split_sizes


def world_shares(train: int, worlds: int, world_train: int = 0) -> list[int]:
    """Train tasks per world: ``train`` spread evenly, world 0 taking the remainder; or, with
    ``world_train``, all of ``train`` in world 0 and ``world_train`` in each other world."""
    if worlds < 1:
        raise ValueError(f"worlds must be at least 1, not {worlds}")
    if world_train < 0:
        raise ValueError(f"world_train must be 0 or more, not {world_train}")
    if world_train:
        return [train] + [world_train] * (worlds - 1)
    each, rest = divmod(train, worlds)
    return [each + rest] + [each] * (worlds - 1)


def _instance(task: Task) -> str:
    """What a task asks whatever its world calls things: its template and entities."""
    return json.dumps([task.env, task.template, task.entities], sort_keys=True, default=str)


def across_worlds(generator_for: Callable[[int], TemplateGenerator[Any]], n: int, seed: int = 0,
                  worlds: int = 1, world_train: int = 0) -> SynthReport:
    """``n`` verified tasks (plus ``world_train`` per world > 0): train from worlds
    ``0..worlds-1``, test and held-out from world 0.

    ``worlds=1`` is exactly the plain generator (``generator_for(0)(n, seed)``)."""
    shares = world_shares(split_sizes(n)["train"], worlds, world_train)
    first = generator_for(0)
    if worlds == 1:
        return first(n, seed)
    rng = random.Random(seed)
    seen: set[str] = set()
    dropped: Counter[str] = Counter()
    sizes = split_sizes(n)
    tasks = (first.fill({"train": shares[0], "test": sizes["test"]}, rng, seen, dropped)
             + first.fill({"heldout": sizes["heldout"]}, rng, seen, dropped))
    known = Deduper()
    for task in tasks:
        known.add(task)
    # A world renames what it can, not what a template asks: code's worlds rename only the
    # function, so a test task's template and parameters come back in other words and another
    # plan. That instance is redrawn as well (train instances may recur: that is code's world).
    measured = {_instance(t) for t in tasks if t.split != "train"}

    def vet(task: Task) -> str | None:
        hit = known.check_prompt(task.prompt) or known.check_plan(task.env, task.reference, None)
        if hit is None and _instance(task) in measured:
            hit = ("duplicate", "")
        if hit is None:
            known.add(task)  # kept: later worlds must not repeat it either
        return hit[0] if hit else None

    for world in range(1, worlds):
        tasks += generator_for(world).fill({"train": shares[world]}, rng, seen, dropped, vet)
    return first.report(tasks, dropped, n + (worlds - 1) * world_train)


__all__ = ["across_worlds", "world_shares"]
