"""Web task templates: draw entities, state the goal, and browse to it for real.

Each template has three parts:

* ``draw(rng, pools)`` picks entity values (a product, a category and color, a class session,
  a person) from the seen or the held-out partition;
* ``goal(catalog, entities)`` states the end state the task wants, read from the catalog (the
  ground truth), or raises ``Drop`` when the task would be ambiguous (two items tie for
  cheapest) or impossible (out of stock, session full);
* ``plan(planner, entities, goal)`` drives a real ``WebEnv`` through the site, call by call, with
  one sentence of reasoning per call. Where a choice depends on what a page shows (the first hit
  of a sorted listing), the plan reads the page and drops the task if the page disagrees with the
  ground truth, so a broken sort or filter on the site can never produce a task.

The generator (``tasks.web``) then replays the recorded calls in a fresh environment and keeps the
task only if ``verify()`` accepts.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trajforge.envs.web.env import WebEnv
from trajforge.envs.web.shop.catalog import (
    Catalog,
    Product,
    WorkshopClass,
    world_names,
)
from trajforge.envs.web.shop.goals import Address, BookingGoal, ItemGoal, OrderGoal
from trajforge.envs.web.shop.site import filter_products
from trajforge.envs.web.shop.state import SHIPPING
from trajforge.schema import Tier
from trajforge.envs.web.shop.worlds import HELDOUT_BRANDS, HELDOUT_CATEGORIES, HELDOUT_CLASSES
from trajforge.tasks.templates import Drop, Recorder

Goal = OrderGoal | BookingGoal


@dataclass(frozen=True)
class Pools:
    """The entity values one partition (seen or held-out) may use."""

    catalog: Catalog
    heldout: bool

    def is_heldout(self, p: Product) -> bool:
        return p.category in HELDOUT_CATEGORIES or p.brand in HELDOUT_BRANDS

    def products(self, where: Callable[[Product], bool] = lambda p: True) -> list[Product]:
        return [p for p in self.catalog.products if self.is_heldout(p) == self.heldout and where(p)]

    def categories(self) -> list[str]:
        return [c for c in self.catalog.categories if (c in HELDOUT_CATEGORIES) == self.heldout]

    def classes(self) -> list[WorkshopClass]:
        return [c for c in self.catalog.classes if (c.name in HELDOUT_CLASSES) == self.heldout]


class Planner(Recorder):
    """Runs reference calls in a real WebEnv and records them with the expert's words."""

    def __init__(self, env: WebEnv, catalog: Catalog):
        super().__init__(env)
        self.catalog = catalog

    def product_links(self) -> list[str]:
        """Labels of the product links on the current page, in page order."""
        page = self.env.page
        assert page is not None
        return [e.label for e in page.elements
                if e.kind == "link" and (e.href or "").startswith("/product/")]

    def on_page(self, label: str) -> None:
        if label not in self.product_links():
            raise Drop("reference_mismatch")  # the site does not show what the catalog says

    def first_product(self, expected: str) -> str:
        """The first listed product, which must be the catalog's answer."""
        links = self.product_links()
        if not links or links[0] != expected:
            raise Drop("reference_mismatch")
        return links[0]


@dataclass(frozen=True)
class Template:
    id: str
    tier: Tier
    prompt: str
    """Filled with the drawn entities."""
    draw: Callable[[random.Random, Pools], dict[str, Any]]
    goal: Callable[[Catalog, dict[str, Any]], Goal]
    plan: Callable[[Planner, dict[str, Any], Goal], None]
    heldout_only: bool = False
    """Appears only in the held-out split (a close cousin of a seen template)."""
    overview: str = ""
    """Medium and hard templates: what the expert says before its first sentence — which pages
    it will go through and why, filled with the entities (planning text sized to the task)."""


# ---- shared steps -----------------------------------------------------------------------------

def person(rng: random.Random, world: int = 0) -> dict[str, str]:
    """Someone to ship to or book for, with names and places of ``world``."""
    names = world_names(world)
    first, last = rng.choice(names.first_names), rng.choice(names.last_names)
    return {"name": f"{first} {last}", "email": f"{first}.{last}@example.com".lower(),
            "address": f"{rng.randint(1, 99)} {rng.choice(names.streets)}", "city": rng.choice(names.cities)}


def _price(x: float) -> str:
    return f"${x:,.2f}"


def _search_and_open(p: Planner, product: Product, first: bool) -> None:
    if first:
        p.do("I'll start on the shop's home page, which has a search box.", "open", url="/")
    p.do(f"I'll type the product name, {product.name}, into the search box.", "type",
         field="q", text=product.name)
    p.do("Now I'll run the search.", "submit")
    p.on_page(product.name)
    p.do(f"The {product.name} is in the results, so I'll open its page.", "click",
         element=product.name)


def _add_to_cart(p: Planner, product: Product, item: ItemGoal) -> None:
    if item.color is not None:
        p.do(f"The task wants it in {item.color}, so I'll pick that color.", "type",
             field="color", text=item.color)
    if item.size is not None:
        p.do(f"I'll choose size {item.size}.", "type", field="size", text=item.size)
    if item.quantity != 1:
        p.do(f"I need {item.quantity} of them, so I'll set the quantity.", "type",
             field="quantity", text=str(item.quantity))
    p.do(f"Now I'll add the {product.name} to the cart.", "click", element="Add to cart")


def _checkout(p: Planner, goal: OrderGoal) -> None:
    p.do("The cart is right, so I'll go to checkout.", "click", element="Proceed to checkout")
    if goal.ship_to is not None:
        to = goal.ship_to
        p.do(f"It ships to {to.name}, so I'll replace the prefilled name.", "type",
             field="full_name", text=to.name)
        p.do(f"Their address is {to.address}.", "type", field="address", text=to.address)
        p.do(f"And the city is {to.city}.", "type", field="city", text=to.city)
    label = SHIPPING[goal.shipping][0]
    if goal.shipping != "standard":
        p.do(f"The task asks for {label.split(' (')[0].lower()} shipping, so I'll select it.",
             "type", field="shipping", text=goal.shipping)
        p.do("Everything matches the task, so I'll place the order.", "click",
             element="Place order")
    else:
        p.do("Standard shipping is already selected and the details are right, so I'll place "
             "the order.", "click", element="Place order")


def _open_category(p: Planner, category: str, first: bool = True) -> None:
    if first:
        p.do("I'll start on the shop's home page to find the categories.", "open", url="/")
    else:
        p.do("Back to the home page for the next category.", "click", element="Home")
    p.do(f"I'll open the {category} category.", "click", element=category)


def _item(p: Product, **options: Any) -> ItemGoal:
    return ItemGoal(product=p.id, name=p.name, **options)


def _buyable(p: Product, quantity: int = 1) -> None:
    if p.stock < quantity:
        raise Drop("out_of_stock")


def _unique_first(ranked: list[Product], key: Callable[[Product], Any]) -> Product:
    """The top product of a ranking, unless the runner-up ties with it."""
    if not ranked:
        raise Drop("no_match")
    if len(ranked) > 1 and key(ranked[0]) == key(ranked[1]):
        raise Drop("ambiguous_answer")
    return ranked[0]


# ---- easy: buy a named product ----------------------------------------------------------------

def _draw_named(rng: random.Random, pools: Pools, where: Callable[[Product], bool] = lambda p: True
                ) -> dict[str, Any]:
    product = rng.choice(pools.products(where))
    return {"product": product.name, "category": product.category, "brand": product.brand}


def _named(catalog: Catalog, e: dict[str, Any]) -> Product:
    product = catalog.product_named(e["product"])
    if product is None:
        raise Drop("reference_error")
    return product


def _goal_named(catalog: Catalog, e: dict[str, Any]) -> OrderGoal:
    product = _named(catalog, e)
    quantity = int(e.get("quantity", 1))
    _buyable(product, quantity)
    item = _item(product, color=e.get("color"), size=e.get("size"), quantity=quantity)
    return OrderGoal(items=[item], shipping=e.get("shipping", "standard"))


def _plan_named(p: Planner, e: dict[str, Any], goal: Goal) -> None:
    assert isinstance(goal, OrderGoal)
    product = _named(p.catalog, e)
    _search_and_open(p, product, first=True)
    _add_to_cart(p, product, goal.items[0])
    _checkout(p, goal)


def _draw_named_color(rng: random.Random, pools: Pools) -> dict[str, Any]:
    e = _draw_named(rng, pools, lambda p: len(p.colors) > 1)
    product = pools.catalog.product_named(e["product"])
    assert product is not None
    return e | {"color": rng.choice(product.colors)}


def _draw_named_quantity(rng: random.Random, pools: Pools) -> dict[str, Any]:
    return _draw_named(rng, pools) | {"quantity": rng.randint(2, 4)}


def _draw_named_pickup(rng: random.Random, pools: Pools) -> dict[str, Any]:
    return _draw_named(rng, pools) | {"shipping": "pickup"}


def _draw_named_options(rng: random.Random, pools: Pools) -> dict[str, Any]:
    e = _draw_named(rng, pools, lambda p: bool(p.sizes))
    product = pools.catalog.product_named(e["product"])
    assert product is not None
    return e | {"color": rng.choice(product.colors), "size": rng.choice(product.sizes),
                "quantity": rng.randint(1, 3), "shipping": "express"}


# ---- medium/hard: find the right product on a filtered, sorted listing ------------------------

def _ranked(catalog: Catalog, category: str, filters: dict[str, str]) -> list[Product]:
    return filter_products(catalog.in_category(category), filters)


def _pick_listing(p: Planner, e: dict[str, Any], filters: dict[str, str], sort_label: str,
                  why: str, first: bool = True) -> Product:
    """Open the category, set the filters and the sort, and open the first product listed."""
    _open_category(p, e["category"] if first else e["category2"], first=first)
    for field, value in filters.items():
        if field == "sort":
            continue
        what = {"color": f"only {value} items", "brand": f"only {value} products",
                "max_price": f"items up to ${value}", "size": f"items in size {value}"}[field]
        p.do(f"I'll filter the listing to {what}.", "type", field=field, text=value)
    p.do(f"I'll sort by {sort_label.lower()}.", "type", field="sort", text=sort_label)
    p.do("Now I'll apply the filters.", "submit")
    category = e["category"] if first else e["category2"]
    truth = _ranked(p.catalog, category, filters)[0]
    name = p.first_product(truth.name)
    p.do(why.format(name=name, price=_price(truth.price), rating=truth.rating), "click",
         element=name)
    return truth


def _draw_category_color(rng: random.Random, pools: Pools) -> dict[str, Any]:
    category = rng.choice(pools.categories())
    return {"category": category, "color": rng.choice(pools.catalog.category_spec(category).colors)}


def _goal_cheapest_color(catalog: Catalog, e: dict[str, Any], sort: str = "price_asc"
                         ) -> OrderGoal:
    ranked = _ranked(catalog, e["category"], {"color": e["color"], "sort": sort})
    pick = _unique_first(ranked, lambda p: p.price)
    _buyable(pick)
    return OrderGoal(items=[_item(pick, color=e["color"])], shipping="standard")


def _plan_cheapest_color(p: Planner, e: dict[str, Any], goal: Goal, sort: str = "price_asc"
                         ) -> None:
    assert isinstance(goal, OrderGoal)
    label = "Price: low to high" if sort == "price_asc" else "Price: high to low"
    word = "cheapest" if sort == "price_asc" else "most expensive"
    product = _pick_listing(p, e, {"color": e["color"], "sort": sort}, label,
                            f"The {word} {e['color']} one is the {{name}} at {{price}}, "
                            "so I'll open it.")
    _add_to_cart(p, product, goal.items[0])
    _checkout(p, goal)


def _draw_category_brand(rng: random.Random, pools: Pools) -> dict[str, Any]:
    # Held out when the category or the brand is: (Water Bottles, Altura) and (Yoga Mats,
    # Solano) are both held-out pairs.
    pairs = [(c, b) for c in pools.catalog.categories for b in sorted({p.brand for p in
                                                         pools.catalog.in_category(c)})
             if (c in HELDOUT_CATEGORIES or b in HELDOUT_BRANDS) == pools.heldout]
    category, brand = rng.choice(pairs)
    return {"category": category, "brand": brand}


def _goal_cheapest_brand(catalog: Catalog, e: dict[str, Any]) -> OrderGoal:
    ranked = _ranked(catalog, e["category"], {"brand": e["brand"], "sort": "price_asc"})
    if len(ranked) < 2:
        raise Drop("too_few_matches")  # "the cheapest" of one item is no search at all
    pick = _unique_first(ranked, lambda p: p.price)
    _buyable(pick)
    return OrderGoal(items=[_item(pick)], shipping="express")


def _plan_cheapest_brand(p: Planner, e: dict[str, Any], goal: Goal) -> None:
    assert isinstance(goal, OrderGoal)
    product = _pick_listing(p, e, {"brand": e["brand"], "sort": "price_asc"},
                            "Price: low to high",
                            f"The cheapest {e['brand']} item is the {{name}} at {{price}}, so "
                            "I'll open it.")
    _add_to_cart(p, product, goal.items[0])
    _checkout(p, goal)


def _draw_budget(rng: random.Random, pools: Pools) -> dict[str, Any]:
    category = rng.choice(pools.categories())
    prices = sorted(p.price for p in pools.catalog.in_category(category))
    # A cap between the 3rd-cheapest and the priciest item, so the cap really filters.
    budget = int(rng.uniform(prices[2], prices[-1]))
    return {"category": category, "budget": budget}


def _goal_budget(catalog: Catalog, e: dict[str, Any]) -> OrderGoal:
    ranked = _ranked(catalog, e["category"], {"max_price": str(e["budget"]), "sort": "rating"})
    pick = _unique_first(ranked, lambda p: p.rating)
    _buyable(pick)
    return OrderGoal(items=[_item(pick)], shipping="express")


def _plan_budget(p: Planner, e: dict[str, Any], goal: Goal) -> None:
    assert isinstance(goal, OrderGoal)
    product = _pick_listing(p, e, {"max_price": str(e["budget"]), "sort": "rating"},
                            "Customer rating",
                            f"The best-rated item up to ${e['budget']} is the {{name}} "
                            "(rated {rating}, {price}), so I'll open it.")
    _add_to_cart(p, product, goal.items[0])
    _checkout(p, goal)


def _draw_gift(rng: random.Random, pools: Pools) -> dict[str, Any]:
    return _draw_category_color(rng, pools) | {f"to_{k}": v for k, v in person(rng, pools.catalog.world).items()
                                               if k != "email"}


def _goal_gift(catalog: Catalog, e: dict[str, Any]) -> OrderGoal:
    goal = _goal_cheapest_color(catalog, e)
    to = Address(name=e["to_name"], address=e["to_address"], city=e["to_city"])
    return goal.model_copy(update={"shipping": "express", "ship_to": to})


def _draw_two_named(rng: random.Random, pools: Pools) -> dict[str, Any]:
    first, second = rng.sample(pools.products(lambda p: len(p.colors) > 1), 2)
    return {"product": first.name, "color": rng.choice(first.colors), "product2": second.name,
            "quantity2": rng.randint(2, 3)}


def _goal_two_named(catalog: Catalog, e: dict[str, Any]) -> OrderGoal:
    first = _named(catalog, e)
    second = _named(catalog, {"product": e["product2"]})
    _buyable(first)
    _buyable(second, e["quantity2"])
    return OrderGoal(items=[_item(first, color=e["color"]),
                            _item(second, quantity=e["quantity2"])], shipping="standard")


def _plan_two_named(p: Planner, e: dict[str, Any], goal: Goal) -> None:
    assert isinstance(goal, OrderGoal)
    first = _named(p.catalog, e)
    second = _named(p.catalog, {"product": e["product2"]})
    _search_and_open(p, first, first=True)
    _add_to_cart(p, first, goal.items[0])
    _search_and_open(p, second, first=False)
    _add_to_cart(p, second, goal.items[1])
    _checkout(p, goal)


def _draw_two_cheapest(rng: random.Random, pools: Pools) -> dict[str, Any]:
    # The first category comes from the partition; in the held-out split the second may be any
    # other (two held-out categories alone would allow only two tasks).
    first = rng.choice(pools.categories())
    second = rng.choice([c for c in (pools.catalog.categories if pools.heldout else pools.categories())
                         if c != first])
    return {"category": first, "category2": second}


def _goal_two_cheapest(catalog: Catalog, e: dict[str, Any]) -> OrderGoal:
    items = []
    for key in ("category", "category2"):
        pick = _unique_first(_ranked(catalog, e[key], {"sort": "price_asc"}), lambda p: p.price)
        _buyable(pick)
        items.append(_item(pick))
    return OrderGoal(items=items, shipping="standard")


def _plan_two_cheapest(p: Planner, e: dict[str, Any], goal: Goal) -> None:
    assert isinstance(goal, OrderGoal)
    for i, first in enumerate((True, False)):
        key = "category" if first else "category2"
        product = _pick_listing(p, e, {"sort": "price_asc"}, "Price: low to high",
                                f"The cheapest {e[key]} item is the {{name}} at {{price}}, so "
                                "I'll open it.", first=first)
        _add_to_cart(p, product, goal.items[i])
    _checkout(p, goal)


# ---- bookings ---------------------------------------------------------------------------------

def _draw_booking(rng: random.Random, pools: Pools) -> dict[str, Any]:
    workshop = rng.choice(pools.classes())
    session = rng.choice(workshop.sessions)
    who = person(rng, pools.catalog.world)
    seats = rng.randint(1, 3)
    return {"class": workshop.name, "session": session.label, "seats": seats,
            "seats_text": f"{seats} seat" + ("s" if seats > 1 else ""), "name": who["name"],
            "email": who["email"]}


def _workshop(catalog: Catalog, name: str) -> WorkshopClass:
    found = next((c for c in catalog.classes if c.name == name), None)
    if found is None:
        raise Drop("reference_error")
    return found


def _goal_booking(catalog: Catalog, e: dict[str, Any]) -> BookingGoal:
    workshop = _workshop(catalog, e["class"])
    session = next(s for s in workshop.sessions if s.label == e["session"])
    if session.seats_left < e["seats"]:
        raise Drop("sold_out")
    return BookingGoal(workshop=workshop.id, session=session.id, seats=e["seats"],
                       name=e["name"], email=e["email"])


def _plan_booking(p: Planner, e: dict[str, Any], goal: Goal, why_session: str = "") -> None:
    assert isinstance(goal, BookingGoal)
    workshop = _workshop(p.catalog, e["class"])
    session = next(s for s in workshop.sessions if s.id == goal.session)
    p.do("Classes are booked from the classes page, so I'll open it.", "open", url="/classes")
    p.do(f"I'll open the {workshop.name} class.", "click", element=workshop.name)
    p.do(why_session or f"I'll choose the session on {session.label}.", "type", field="session",
         text=session.label)
    seats = "seat" if goal.seats == 1 else "seats"
    p.do(f"The booking is for {goal.seats} {seats}.", "type", field="seats", text=str(goal.seats))
    p.do(f"I'll enter the attendee's name, {goal.name}.", "type", field="name", text=goal.name)
    p.do("And their email address.", "type", field="email", text=goal.email)
    p.do("The form is complete, so I'll book it.", "click", element="Book now")


def _draw_earliest(rng: random.Random, pools: Pools) -> dict[str, Any]:
    workshop = rng.choice(pools.classes())
    who = person(rng, pools.catalog.world)
    return {"class": workshop.name, "seats": rng.randint(2, 4), "name": who["name"],
            "email": who["email"]}


def _goal_earliest(catalog: Catalog, e: dict[str, Any]) -> BookingGoal:
    workshop = _workshop(catalog, e["class"])
    fits = [s for s in workshop.sessions if s.seats_left >= e["seats"]]
    if not fits:
        raise Drop("sold_out")
    if fits[0] is workshop.sessions[0]:
        raise Drop("no_skip")  # the template is about skipping sessions that are too full
    return BookingGoal(workshop=workshop.id, session=fits[0].id, seats=e["seats"],
                       name=e["name"], email=e["email"])


def _plan_earliest(p: Planner, e: dict[str, Any], goal: Goal) -> None:
    assert isinstance(goal, BookingGoal)
    workshop = _workshop(p.catalog, e["class"])
    session = next(s for s in workshop.sessions if s.id == goal.session)
    _plan_booking(p, e, goal, why_session=f"The earliest session with at least {goal.seats} "
                                          f"free seats is {session.label}, so I'll choose it.")


TEMPLATES: tuple[Template, ...] = (
    # ---- easy: a named product, one or two choices ----------------------------------------
    Template(id="buy_named", tier="easy", draw=_draw_named, goal=_goal_named, plan=_plan_named,
             prompt="Buy one {product} with standard shipping."),
    Template(id="buy_named_color", tier="easy", draw=_draw_named_color, goal=_goal_named,
             plan=_plan_named, prompt="Buy the {product} in {color}, with standard shipping."),
    Template(id="buy_named_quantity", tier="easy", draw=_draw_named_quantity, goal=_goal_named,
             plan=_plan_named, prompt="Buy {quantity} of the {product}, with standard shipping."),
    Template(id="buy_named_pickup", tier="easy", draw=_draw_named_pickup, goal=_goal_named,
             plan=_plan_named, heldout_only=True,
             prompt="Buy one {product} and collect it with store pickup."),
    # ---- medium: search a listing with filters and sort, or fill a form -------------------
    Template(id="cheapest_in_color", tier="medium", draw=_draw_category_color,
             goal=_goal_cheapest_color, plan=_plan_cheapest_color,
             overview=("A search cannot rank by price, so I'll use the {category} listing, filtered to "
                       "{color} and sorted from the lowest price, and take its first item."),
             prompt="Find the cheapest item in {category} that comes in {color} and buy one "
                    "in {color}, with standard shipping."),
    Template(id="cheapest_of_brand", tier="medium", draw=_draw_category_brand,
             goal=_goal_cheapest_brand, plan=_plan_cheapest_brand,
             overview=("A search cannot rank by price, so I'll use the {category} listing, filtered to "
                       "{brand} and sorted from the lowest price, and take its first item."),
             prompt="Buy the cheapest {brand} item in {category}, with express shipping."),
    Template(id="named_with_options", tier="medium", draw=_draw_named_options, goal=_goal_named,
             plan=_plan_named,
             overview=("I'll find the {product} by search, set its color, size and quantity on its page, "
                       "and pick express shipping at checkout."),
             prompt="Buy {quantity} of the {product} in {color}, size {size}, with express "
                    "shipping."),
    Template(id="book_class", tier="medium", draw=_draw_booking, goal=_goal_booking,
             plan=_plan_booking,
             overview=("Classes are not in the shop: the {class} class has its own page under the classes "
                       "page, where I'll pick the session and fill in the booking."),
             prompt="Book {seats_text} in the {class} class on {session} for {name}, email "
                    "{email}."),
    Template(id="priciest_in_color", tier="medium", draw=_draw_category_color,
             goal=lambda c, e: _goal_cheapest_color(c, e, sort="price_desc"),
             plan=lambda p, e, g: _plan_cheapest_color(p, e, g, sort="price_desc"),
             heldout_only=True,
             overview=("A search cannot rank by price, so I'll use the {category} listing, filtered to "
                       "{color} and sorted from the highest price, and take its first item."),
             prompt="Find the most expensive item in {category} that comes in {color} and buy "
                    "one in {color}, with standard shipping."),
    # ---- hard: several items, a budget, another recipient, or reading availability --------
    Template(id="two_named_items", tier="hard", draw=_draw_two_named, goal=_goal_two_named,
             plan=_plan_two_named,
             overview=("Both items go in one order, so I'll search for the {product} and add it, then the "
                       "{product2}, and check out once."),
             prompt="In one order, buy the {product} in {color} and {quantity2} of the "
                    "{product2}, with standard shipping."),
    Template(id="best_rated_under_budget", tier="hard", draw=_draw_budget, goal=_goal_budget,
             plan=_plan_budget,
             overview=("The {category} listing can cap the price at ${budget} and sort by rating, so its "
                       "first item is the one to buy."),
             prompt="Buy the highest-rated item in {category} that costs at most ${budget}, "
                    "with express shipping."),
    Template(id="gift_cheapest_in_color", tier="hard", draw=_draw_gift, goal=_goal_gift,
             plan=_plan_cheapest_color,
             overview=("I'll find the cheapest {color} item in the {category} listing, filtered and sorted "
                       "by price, then ship it to {to_name} at checkout."),
             prompt="Find the cheapest item in {category} that comes in {color} and send one "
                    "in {color} to {to_name}, {to_address}, {to_city}, with express shipping."),
    Template(id="earliest_open_session", tier="hard", draw=_draw_earliest, goal=_goal_earliest,
             plan=_plan_earliest,
             overview=("The {class} class page lists each session with its free seats, so I'll read them "
                       "there and take the earliest with {seats} free."),
             prompt="Book {seats} seats for {name} (email {email}) in the earliest {class} "
                    "session that still has at least {seats} free seats."),
    Template(id="two_cheapest_items", tier="hard", draw=_draw_two_cheapest,
             goal=_goal_two_cheapest, plan=_plan_two_cheapest, heldout_only=True,
             overview=("I'll take the first item of the {category} listing sorted by price, then the same "
                       "in {category2}, and check out once."),
             prompt="In one order, buy the cheapest item in {category} and the cheapest item in "
                    "{category2}, with standard shipping."),
)
TEMPLATES_BY_ID: dict[str, Template] = {t.id: t for t in TEMPLATES}
