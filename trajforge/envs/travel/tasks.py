"""Travel task templates: booking requests with plans executed in ``TravelEnv`` and verified.

``generate_travel_tasks(n, seed)`` draws template instances and runs each template's *plan* twice:

1. against the catalog directly (``CatalogView``): this decides the right bookings, which become
   ``task.expected`` (or drops the instance: no option fits, a tie for cheapest, ...);
2. through the real environment's tools (``ToolView``), reading the rendered tool output back
   like an agent would: the calls become ``task.reference`` and the plan's sentences
   ``task.reasoning``.

The task is kept only if replaying the reference in a fresh environment makes ``verify()``
accept, i.e. the tool path booked exactly what the catalog path decided. Any disagreement
(rendering, parsing, inventory) is dropped as ``verifier_rejected`` and counted.

Tiers come from the reference plan: score = calls + distinct tools + 4 if the plan branches on a
tool result (the weather). Up to 6 is easy (search, book, finish), up to 10 medium (two bookings,
or rebooking), above hard (branching, three bookings).

Splits test generalisation along three axes:

* held-out *entities*: ``HELDOUT_CITIES`` and ``HELDOUT_DAYS`` appear only in ``heldout``;
* held-out *templates*: those with ``heldout_only=True``;
* held-out *tool combinations*: ``HELDOUT_TOOL_GROUPS`` — no train or test reference uses
  ``get_weather`` together with ``book_hotel``, or ``cancel_booking`` together with
  ``book_hotel``; only held-out templates do (``trajforge.tasks.splits`` checks and enforces it).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from trajforge.envs.travel.catalog import Catalog, catalog, clock
from trajforge.envs.travel.cities import HELDOUT_CITIES, world_cities
from trajforge.envs.travel.env import TravelEnv
from trajforge.envs.travel.plans import (CatalogView, ToolView, View, plan_cancel_hotel, plan_cheapest_flight,
                                         plan_flight_before_under, plan_hotel_any, plan_hotel_stars,
                                         plan_latest_before, plan_latest_flight, plan_multi_leg, plan_rebook_flight,
                                         plan_rebook_hotel, plan_round_trip, plan_trip, plan_weather_flight,
                                         plan_weather_hotel)
from trajforge.schema import Split, Task, Tier, ToolCall
from trajforge.tasks.pool import SynthReport
from trajforge.tasks.splits import drop_combo_leaks
from trajforge.tasks.templates import Drop, TemplateGenerator, stable_id
from trajforge.tasks.verify import replay_reference

# Worlds (``cities.py``): ``generator(world_seed, world)`` draws the same templates among another
# world's cities, flights and hotels, for the train split of a pool drawn across worlds
# (``trajforge.tasks.worlds``). Days, passengers and hotel names are the same in every world.

SEEN_DAYS: tuple[str, ...] = tuple(str(date(2026, 12, d)) for d in range(1, 15))
HELDOUT_DAYS: tuple[str, ...] = tuple(str(date(2026, 12, d)) for d in range(15, 22))
HELDOUT_TOOL_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({"get_weather", "book_hotel"}),
    frozenset({"cancel_booking", "book_hotel"}),
)
PASSENGERS: tuple[str, ...] = ("Li Wei", "Wang Fang", "Zhang Min", "Chen Jing", "Liu Yang",
                               "Zhao Lei", "Anna Schmidt", "James Brown", "Maria Garcia",
                               "Kenji Sato", "Sofia Rossi", "Priya Patel")
CITY_SLOTS = ("origin", "destination", "city", "via")
DAY_SLOTS = ("date", "date2")


# ---- templates ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Template:
    """One request pattern: prompt, entity slots and the plan that fulfils it."""

    id: str
    prompt: str
    slots: tuple[str, ...]
    """Entity kinds to draw: cities (origin, destination, city, via), days (date, date2),
    passenger, nights, stars, and the constraint slots max_price / before."""
    plan: Callable[[View, dict[str, Any]], None]
    branching: bool = False
    """The plan's next step depends on a tool result (the forecast)."""
    heldout_only: bool = False
    existing: str | None = None
    """``flight`` / ``hotel``: the task starts with that booking (plus an unrelated one)."""


TEMPLATES: tuple[Template, ...] = (
    Template("cheapest_flight", "Book the cheapest available flight from {origin} to "
             "{destination} on {date} for {passenger}.",
             ("origin", "destination", "date", "passenger"), plan_cheapest_flight),
    Template("flight_before_under", "Book {passenger} on a flight from {origin} to {destination} "
             "on {date} that leaves before {before} and costs at most {max_price} CNY. If several "
             "fit, take the cheapest.",
             ("origin", "destination", "date", "passenger", "before", "max_price"),
             plan_flight_before_under),
    Template("hotel_stars", "Book the cheapest {stars}-star hotel in {city} for {nights} nights "
             "from {date}, for {passenger}.",
             ("city", "date", "nights", "stars", "passenger"), plan_hotel_stars),
    Template("trip", "Plan a trip for {passenger}: the cheapest available flight from {origin} to "
             "{destination} on {date}, and the cheapest hotel with at least {stars} stars in "
             "{destination} for {nights} nights from that day.",
             ("origin", "destination", "date", "nights", "stars", "passenger"), plan_trip),
    Template("round_trip", "Book {passenger} a round trip from {origin} to {destination}: out on "
             "{date}, back on {date2}. Take the cheapest available flight each way.",
             ("origin", "destination", "date", "date2", "passenger"), plan_round_trip),
    Template("rebook_flight", "{passenger} can no longer take the booked flight from {origin} to "
             "{destination} on {date}. Cancel that booking and book the cheapest available "
             "flight on the same route on {date2} instead. Keep the other bookings.",
             ("origin", "destination", "date", "date2", "passenger"), plan_rebook_flight,
             existing="flight"),
    Template("weather_flight", "{passenger} is flying from {origin} to {destination} on {date}. "
             "Check the forecast for {destination} that day: if rain is forecast, book the "
             "earliest available flight; otherwise book the cheapest available flight.",
             ("origin", "destination", "date", "passenger"), plan_weather_flight, branching=True),
    Template("multi_leg", "Book {passenger}'s trip from {origin} via {via} to {destination}: the "
             "cheapest available flight from {origin} to {via} on {date}, the cheapest hotel "
             "with at least {stars} stars in {via} from {date} until {date2}, and the cheapest "
             "available flight from {via} to {destination} on {date2}.",
             ("origin", "via", "destination", "date", "date2", "stars", "passenger"),
             plan_multi_leg),
    # ---- held-out cousins: a new constraint, and the held-out tool combinations -----------------
    Template("latest_before", "Book {passenger} on the latest available flight from {origin} to "
             "{destination} on {date} that leaves before {before}.",
             ("origin", "destination", "date", "passenger", "before"), plan_latest_before,
             heldout_only=True),
    Template("rebook_hotel", "{passenger} wants to change hotels in {city}: cancel the current "
             "hotel booking there and book the cheapest hotel with at least {stars} stars from "
             "{date} for {nights} nights instead. Keep the other bookings.",
             ("city", "origin", "date", "nights", "stars", "passenger"), plan_rebook_hotel,
             heldout_only=True, existing="hotel"),
    Template("weather_hotel", "{passenger} arrives in {city} on {date} for {nights} nights. Check "
             "the forecast for {city} that day: if rain is forecast, book the cheapest hotel with "
             "at least {stars} stars; otherwise book the cheapest hotel of any rating.",
             ("city", "date", "nights", "stars", "passenger"), plan_weather_hotel,
             branching=True, heldout_only=True),
)
# ---- composition templates: train-only parts of the held-out-only templates -------------------
# Each held-out-only template joins two things the train templates never show together; these
# show the part that no train template shows at all, alone, so the held-out cell stays a new
# combination of seen parts (as SQL's ``COMPOSE_TEMPLATES`` do). A tuned model never cancelled a
# hotel on ``rebook_hotel`` (0 of 23, stop 61): no train task cancels one. None of these uses a
# held-out tool group, and they draw seen cities and days only (``generate_compose_tasks``).
COMPOSE_TEMPLATES: tuple[Template, ...] = (
    Template("cancel_hotel", "{passenger} no longer needs the hotel booked in {city} from {date}: "
             "cancel that hotel booking. Keep the other bookings.",
             ("city", "origin", "date", "nights", "stars", "passenger"), plan_cancel_hotel,
             existing="hotel"),  # rebook_hotel's first half (its second is hotel_stars)
    Template("latest_flight", "Book {passenger} on the latest available flight from {origin} to "
             "{destination} on {date}.",
             ("origin", "destination", "date", "passenger"), plan_latest_flight),  # latest_before's "latest"
    Template("hotel_any", "Book the cheapest hotel of any rating in {city} for {nights} nights "
             "from {date}, for {passenger}.",
             ("city", "date", "nights", "passenger"), plan_hotel_any),  # weather_hotel's dry branch
)
TEMPLATES_BY_ID: dict[str, Template] = {t.id: t for t in (*TEMPLATES, *COMPOSE_TEMPLATES)}


def plan_tier(calls: tuple[ToolCall, ...] | list[ToolCall], branching: bool) -> Tier:
    """Tier from the reference plan: calls + distinct tools + 4 for a branch on a tool result."""
    score = len(calls) + len({c.name for c in calls}) + (4 if branching else 0)
    return "easy" if score <= 6 else "medium" if score <= 10 else "hard"


# ---- drawing entities -------------------------------------------------------------------------

def city_values(heldout: bool, world: int = 0) -> tuple[str, ...]:
    """The cities of ``world`` in the held-out (or the seen) partition; a world > 0 has no
    held-out city."""
    return tuple(c.name for c in world_cities(world) if (c.name in HELDOUT_CITIES) == heldout)


def day_values(heldout: bool) -> tuple[str, ...]:
    return HELDOUT_DAYS if heldout else SEEN_DAYS


def draw_entities(template: Template, rng: random.Random, heldout: bool, world: Catalog
                  ) -> dict[str, Any]:
    """Random slot values from the split's partition (plus constraints read off the catalog)."""
    e: dict[str, Any] = {}
    cities = rng.sample(city_values(heldout, world.world), 3)
    for slot, city in zip([s for s in template.slots if s in CITY_SLOTS], cities):
        e[slot] = city
    days = day_values(heldout)
    i = rng.randrange(len(days) - 1) if "date2" in template.slots else rng.randrange(len(days))
    e["date"] = days[i]
    if "date2" in template.slots:
        e["date2"] = days[rng.randrange(i + 1, min(i + 5, len(days)))]
    e["passenger"] = rng.choice(PASSENGERS)
    if "nights" in template.slots:
        e["nights"] = rng.randint(1, 4)
    if "stars" in template.slots:
        e["stars"] = rng.choice((3, 4, 4, 5)) if template.id == "hotel_stars" else rng.randint(3, 4)
    if "before" in template.slots or "max_price" in template.slots:
        flights = world.flights(world.city(e["origin"]), world.city(e["destination"]),
                                date.fromisoformat(e["date"]))
        # A cut-off between two departures, and a cap between two prices, so they bite.
        departs = sorted(f.sched.depart_min for f in flights)
        cut = departs[rng.randrange(1, len(departs))] if len(departs) > 1 else departs[0] + 60
        e["before"] = clock((cut // 60) * 60 if cut % 60 else cut)
        if "max_price" in template.slots:
            prices = sorted(f.price for f in flights)
            e["max_price"] = int(round(prices[rng.randrange(len(prices))] + 50, -2))
    if template.existing:
        e["existing"] = _existing(template, e, world)
    return {k: e[k] for k in (*template.slots, "existing") if k in e}


def _existing(template: Template, e: dict[str, Any], world: Catalog) -> list[dict[str, Any]]:
    """Bookings the task starts with: the one to replace, then an unrelated one to keep.

    Only items with a seat or a room for every night, so setting the stage never fails."""
    name = e["passenger"]
    if template.existing == "flight":
        flights = _flights_with_seats(world, e["origin"], e["destination"], e["date"])
        hotels = _hotels_with_rooms(world, e["destination"], e["date2"], 2)
        if not flights or not hotels:
            return []
        old = flights[-1]  # the latest flight of the day
        keep = min(hotels, key=lambda h: h.base_price)
        return [{"kind": "flight", "item": old.id, "day": e["date"], "nights": 0, "name": name},
                {"kind": "hotel", "item": keep.id, "day": e["date2"], "nights": 2, "name": name}]
    hotels = [h for h in _hotels_with_rooms(world, e["city"], e["date"], e["nights"])
              if h.stars >= e["stars"]]
    flights = _flights_with_seats(world, e["origin"], e["city"], e["date"])
    if not hotels or not flights:
        return []
    old = max(hotels, key=lambda h: h.base_price)  # the priciest: worth changing
    return [{"kind": "hotel", "item": old.id, "day": e["date"], "nights": e["nights"],
             "name": name},
            {"kind": "flight", "item": flights[0].id, "day": e["date"], "nights": 0, "name": name}]


def _flights_with_seats(world: Catalog, origin: str, destination: str, day: str) -> list:
    found = world.flights(world.city(origin), world.city(destination), date.fromisoformat(day))
    return [f for f in found if f.seats > 0]


def _hotels_with_rooms(world: Catalog, city: str, day: str, nights: int) -> list:
    start = date.fromisoformat(day)
    return [h for h in world.hotels[city]
            if all(world.night(h, start + timedelta(days=n))[1] > 0 for n in range(nights))]


# ---- building and generating --------------------------------------------------------------

def task_id(template: Template, entities: dict[str, Any], seed: int, world: int = 0) -> str:
    """Stable id: same template, entities and catalog give the same id on any machine (world 0
    keeps the key it had before worlds)."""
    return stable_id("travel", template.id, [entities, seed, world] if world else [entities, seed])


def build_task(template: Template, entities: dict[str, Any], split: Split, world_seed: int = 0,
               world: int = 0) -> Task | str:
    """Plan the instance against the catalog (of ``world``) and through the tools; the Task or a
    drop reason."""
    if template.existing and not entities.get("existing"):
        return "no_option"
    cat = catalog(world_seed, world)
    probe = Task(id=task_id(template, entities, world_seed, world), env="travel",
                 prompt=template.prompt.format(**entities), tier="easy", split=split,
                 template=template.id, reference=(), expected=None, entities=entities,
                 seed=world_seed, world=world)
    truth = CatalogView(cat, entities.get("existing", []))
    try:
        template.plan(truth, entities)
    except Drop as d:
        return str(d)
    env = TravelEnv(seed=world_seed)
    env.reset(probe)
    tools = ToolView(env)
    try:
        template.plan(tools, entities)
    except Drop as d:
        return str(d)
    task = probe.model_copy(update={
        "reference": tuple(tools.calls), "reasoning": tuple(tools.reasoning),
        "expected": {"bookings": truth.active()},
        "tier": plan_tier(tools.calls, template.branching)})
    if not replay_reference(task).correct:
        return "verifier_rejected"
    return task


def heldout_values() -> set[str]:
    """Every held-out entity value (cities and days)."""
    return set(HELDOUT_CITIES) | set(HELDOUT_DAYS)


def entity_strings(task: Task) -> set[str]:
    """The city and day values a task's prompt was filled with."""
    return {str(task.entities[k]) for k in (*CITY_SLOTS, *DAY_SLOTS) if k in task.entities}


def generate_travel_tasks(n: int, seed: int = 0, world_seed: int = 0) -> SynthReport:
    """``n`` verified travel tasks split train/test/heldout, plus counts of dropped candidates.

    Fewer than ``n`` come back only when the candidate budget runs out
    (``dropped["unfilled"]`` says how many places stayed empty).
    """
    return generator(world_seed)(n, seed)


def generator(world_seed: int = 0, world: int = 0) -> TemplateGenerator[Template]:
    """The travel templates on the skeleton (in ``world``): held-out templates stand twice in the
    held-out rotation (unseen templates and combinations are ~40% of heldout); a candidate budget
    bounds the loop, since entity spaces are too large to exhaust."""
    cat = catalog(world_seed, world)
    return TemplateGenerator(
        templates=TEMPLATES, heldout_repeat=2, budget=lambda wanted: 60 * wanted + 100,
        draw=lambda t, rng, heldout: draw_entities(t, rng, heldout, cat),
        task_id=lambda t, e: task_id(t, e, world_seed, world),
        build=lambda t, e, split: build_task(t, e, split, world_seed, world),
        finish=_drop_combo_leaks)


def generate_compose_tasks(n: int, seed: int = 0, world_seed: int = 0, only: Sequence[str] = ()) -> SynthReport:
    """``n`` verified train tasks of ``COMPOSE_TEMPLATES`` (``only``: those ids), seen entities
    only, to add to a pool's train split (``synth --env travel --compose N``). The template is in
    each id, so none duplicates a pool's own task."""
    # The pool's own generator (its combo-leak guard included) draws them: seen entities, train.
    return generator(world_seed).compose(COMPOSE_TEMPLATES, n, seed, only=only)


def _drop_combo_leaks(tasks: list[Task], dropped: Counter[str]) -> list[Task]:
    # Templates keep held-out combinations out of train by design; this guard makes it a fact.
    tasks, leaked = drop_combo_leaks(tasks, HELDOUT_TOOL_GROUPS)
    if leaked:
        dropped["combo_leak"] += leaked
    return tasks


__all__ = [
    "COMPOSE_TEMPLATES", "HELDOUT_CITIES", "HELDOUT_DAYS", "HELDOUT_TOOL_GROUPS", "TEMPLATES", "Template",
    "build_task", "city_values", "day_values", "draw_entities", "entity_strings",
    "generate_compose_tasks", "generate_travel_tasks", "generator", "heldout_values", "plan_tier", "task_id",
]
