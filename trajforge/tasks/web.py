"""Web task generation: shopping and booking tasks whose reference browsing was run and verified.

``generate_web_tasks(n, seed)`` draws template instances (``tasks.web_templates``), states each
one's goal from the shop's catalog, browses to it for real through a ``WebEnv`` on the loopback
site (recording every call with one sentence of reasoning), replays the recorded calls in a fresh
environment, and keeps the task only when ``verify()`` accepts and every milestone (open, locate,
fill, submit) was reached. Dropped candidates are counted by reason in the ``SynthReport``.

Tiers: easy buys a named product (maybe a color or quantity); medium finds a product on a
filtered, sorted listing, picks several options, or fills the booking form; hard combines two
items, a budget, another recipient's address, or reading seat availability.

Splits test generalisation along two axes, as the SQL generator does:

* held-out *entities*: ``HELDOUT_CATEGORIES`` and ``HELDOUT_BRANDS`` (and every product in them)
  and ``HELDOUT_CLASSES`` appear in ``heldout`` tasks only, and a seen task whose answer turns
  out to be a held-out product is dropped (``heldout_leak``);
* held-out *templates*: those with ``heldout_only=True`` (each a close cousin of a seen one).

``train`` and ``test`` share templates and entities but never a task instance.

Run: ``trajforge synth --env web -n 200`` or ``generate_web_tasks(200, seed=0)``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections import Counter
from typing import Any

from trajforge.envs.web import WebEnv
from trajforge.envs.webshop.catalog import Catalog, build_catalog
from trajforge.envs.webshop.goals import BookingGoal, OrderGoal
from trajforge.schema import Split, Task
from trajforge.tasks.pool import SynthReport
from trajforge.tasks.sql import SPLIT_ORDER, split_sizes
from trajforge.tasks.verify import replay_reference
from trajforge.tasks.web_templates import (
    HELDOUT_BRANDS,
    HELDOUT_CATEGORIES,
    HELDOUT_CLASSES,
    TEMPLATES,
    TEMPLATES_BY_ID,
    Drop,
    Planner,
    Pools,
    Template,
)

MILESTONES: tuple[str, ...] = ("open", "locate", "fill", "submit")
MAX_MISSES = 60
"""A template leaves the rotation after this many candidates in a row that were not kept."""


def task_id(template: Template, entities: dict[str, Any], site_seed: int) -> str:
    """Stable id: same template, entities and site give the same id on any machine."""
    key = json.dumps([entities, site_seed], sort_keys=True)
    return f"web-{template.id}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def heldout_values(site_seed: int = 0) -> set[str]:
    """Every held-out entity value: categories, brands, classes and the products in them."""
    catalog = build_catalog(site_seed)
    products = {p.name for p in catalog.products
                if p.category in HELDOUT_CATEGORIES or p.brand in HELDOUT_BRANDS}
    return {*HELDOUT_CATEGORIES, *HELDOUT_BRANDS, *HELDOUT_CLASSES, *products}


def generate_web_tasks(n: int, seed: int = 0, site_seed: int = 0) -> SynthReport:
    """``n`` verified web tasks split train/test/heldout, plus counts of dropped candidates.

    Fewer than ``n`` come back only when templates run out of new instances
    (``dropped["unfilled"]`` says how many places stayed empty).
    """
    rng = random.Random(seed)
    catalog = build_catalog(site_seed)
    dropped: Counter[str] = Counter()
    seen: set[str] = set()
    sizes = split_sizes(n)
    # train and test draw from one pool (seen templates, seen entities), so a test task is never
    # a train task; heldout draws from its own, disjoint pool.
    tasks = _fill({"train": sizes["train"], "test": sizes["test"]}, rng, Pools(catalog, False),
                  seen, dropped)
    tasks += _fill({"heldout": sizes["heldout"]}, rng, Pools(catalog, True), seen, dropped)
    tasks.sort(key=lambda t: SPLIT_ORDER.index(t.split))
    if len(tasks) < n:
        dropped["unfilled"] = n - len(tasks)
    return SynthReport(tasks=tasks, dropped=dict(dropped))


def _fill(targets: dict[Split, int], rng: random.Random, pools: Pools, seen: set[str],
          dropped: Counter[str]) -> list[Task]:
    """Draw candidates round-robin over templates until every split in ``targets`` is full."""
    rotation = _interleave([t for t in TEMPLATES if pools.heldout or not t.heldout_only])
    misses: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    tasks: list[Task] = []
    i = 0
    while rotation and any(counts[s] < size for s, size in targets.items()):
        template = rotation[i % len(rotation)]
        i += 1
        kept = _candidate(template, rng, pools, targets, counts, seen, dropped)
        if kept is None:
            misses[template.id] += 1
            if misses[template.id] >= MAX_MISSES:
                rotation.remove(template)  # its entity space is used up (or never fits)
            continue
        misses[template.id] = 0
        tasks.append(kept)
        counts[kept.split] += 1
    return tasks


def _interleave(templates: list[Template]) -> list[Template]:
    """Alternate tiers (easy, medium, hard, easy, ...) so even a small split gets every tier."""
    by_tier = [[t for t in templates if t.tier == tier] for tier in ("easy", "medium", "hard")]
    return [t for group in itertools.zip_longest(*by_tier) for t in group if t is not None]


def _candidate(template: Template, rng: random.Random, pools: Pools,
               targets: dict[Split, int], counts: Counter[str], seen: set[str],
               dropped: Counter[str]) -> Task | None:
    entities = template.draw(rng, pools)
    tid = task_id(template, entities, pools.catalog.seed)
    if tid in seen:
        dropped["duplicate"] += 1
        return None
    seen.add(tid)
    # The split furthest below its target takes the task, so splits stay in proportion.
    split = min((s for s in targets if counts[s] < targets[s]),
                key=lambda s: counts[s] / targets[s])
    built = build_task(template, entities, split, pools)
    if isinstance(built, str):
        dropped[built] += 1
        return None
    return built


def build_task(template: Template, entities: dict[str, Any], split: Split, pools: Pools
               ) -> Task | str:
    """Run the template's reference browsing and return the verified Task, or a drop reason."""
    catalog = pools.catalog
    try:
        goal = template.goal(catalog, entities)
    except Drop as d:
        return d.reason
    if not pools.heldout and _leaks(goal, catalog):
        return "heldout_leak"
    probe = Task(id=task_id(template, entities, catalog.seed), env="web",
                 prompt=template.prompt.format(**entities), tier=template.tier, split=split,
                 template=template.id, reference=(), expected=goal.model_dump(),
                 entities=entities, seed=catalog.seed)
    env = WebEnv(seed=catalog.seed)
    env.reset(probe)
    planner = Planner(env, catalog)
    try:
        template.plan(planner, entities, goal)
    except Drop as d:
        return d.reason
    finally:
        env.close()
    task = probe.model_copy(update={"reference": tuple(planner.calls),
                                    "reasoning": tuple(planner.reasoning)})
    verdict = replay_reference(task)
    if not verdict.correct:
        return "verifier_rejected"
    if tuple(verdict.milestones) != MILESTONES:
        return "milestones_incomplete"
    return task


def _leaks(goal: OrderGoal | BookingGoal, catalog: Catalog) -> bool:
    """Whether a seen-split goal resolved to a held-out product or class."""
    if isinstance(goal, BookingGoal):
        workshop = catalog.workshop(goal.workshop)
        return workshop is None or workshop.name in HELDOUT_CLASSES
    held = heldout_values(catalog.seed)
    return any(item.name in held for item in goal.items)


__all__ = [
    "HELDOUT_BRANDS", "HELDOUT_CATEGORIES", "HELDOUT_CLASSES", "MILESTONES", "TEMPLATES",
    "TEMPLATES_BY_ID", "build_task", "generate_web_tasks", "heldout_values",
    "replay_reference", "task_id",
]
