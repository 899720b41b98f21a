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

from typing import Any

from trajforge.envs.web.env import WebEnv
from trajforge.envs.web.shop.catalog import Catalog, build_catalog
from trajforge.envs.web.shop.goals import BookingGoal, OrderGoal
from trajforge.schema import Split, Task
from trajforge.tasks.pool import SynthReport
from trajforge.tasks.templates import Drop, TemplateGenerator, stable_id
from trajforge.tasks.verify import replay_reference
from trajforge.envs.web.templates import (
    HELDOUT_BRANDS,
    HELDOUT_CATEGORIES,
    HELDOUT_CLASSES,
    TEMPLATES,
    TEMPLATES_BY_ID,
    Planner,
    Pools,
    Template,
)

MILESTONES: tuple[str, ...] = ("open", "locate", "fill", "submit")
MAX_MISSES = 60
"""A template leaves the rotation after this many candidates in a row that were not kept."""


def task_id(template: Template, entities: dict[str, Any], site_seed: int, world: int = 0) -> str:
    """Stable id: same template, entities and site give the same id on any machine (world 0 keeps
    the key it had before worlds)."""
    return stable_id("web", template.id, [entities, site_seed, world] if world else [entities, site_seed])


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
    return generator(site_seed)(n, seed)


def generator(site_seed: int = 0, world: int = 0) -> TemplateGenerator[Template]:
    """The web templates on the skeleton (in ``world``'s shop, ``shop/worlds.py``),
    tier-interleaved; a template leaves the rotation after ``MAX_MISSES`` candidates in a row that
    were not kept (its entity space is used up, or never fits)."""
    catalog = build_catalog(site_seed, world)
    pools = {heldout: Pools(catalog, heldout) for heldout in (False, True)}
    return TemplateGenerator(
        templates=TEMPLATES, interleave=True, max_misses=MAX_MISSES,
        draw=lambda t, rng, heldout: t.draw(rng, pools[heldout]),
        task_id=lambda t, e: task_id(t, e, site_seed, world),
        build=lambda t, e, split: build_task(t, e, split, pools[split == "heldout"]))


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
    probe = Task(id=task_id(template, entities, catalog.seed, catalog.world), env="web",
                 prompt=template.prompt.format(**entities), tier=template.tier, split=split,
                 template=template.id, reference=(), expected=goal.model_dump(),
                 entities=entities, seed=catalog.seed, world=catalog.world)
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
                                    "reasoning": with_overview(template, entities, planner.reasoning)})
    verdict = replay_reference(task)
    if not verdict.correct:
        return "verifier_rejected"
    if tuple(verdict.milestones) != MILESTONES:
        return "milestones_incomplete"
    return task


def with_overview(template: Template, entities: dict[str, Any], reasoning: list[str]) -> tuple[str, ...]:
    """The expert's sentences, the first one after the template's overview (medium and hard)."""
    words = list(reasoning)
    if template.overview and words:
        words[0] = f"{template.overview.format(**entities)} {words[0]}"
    return tuple(words)


def _leaks(goal: OrderGoal | BookingGoal, catalog: Catalog) -> bool:
    """Whether a seen-split goal resolved to a held-out product or class."""
    if isinstance(goal, BookingGoal):
        workshop = catalog.workshop(goal.workshop)
        return workshop is None or workshop.name in HELDOUT_CLASSES
    held = heldout_values(catalog.seed)
    return any(item.name in held for item in goal.items)


__all__ = [
    "HELDOUT_BRANDS", "HELDOUT_CATEGORIES", "HELDOUT_CLASSES", "MILESTONES", "TEMPLATES",
    "TEMPLATES_BY_ID", "build_task", "generate_web_tasks", "generator", "heldout_values", "task_id",
]
