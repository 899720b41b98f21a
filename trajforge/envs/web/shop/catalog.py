"""The shop's catalog and class timetable, built deterministically from a seed.

``build_catalog(seed)`` draws products (category, brand, colors, sizes, price, rating, stock) and
workshop classes with dated sessions from ``random.Random(seed)`` and the fixed vocabularies
below. Vocabularies are fixed (only the draws depend on the seed) so held-out categories, brands
and classes are the same names for every seed, and task generators can hold them out by name.

Vocabulary values never contain quotes, commas or ampersands, so they read cleanly in prompts,
URLs and search queries.

``build_catalog(seed, world)`` builds the shop of another world (``worlds.py``: other categories,
brands, models, classes and names, drawn from larger pools); world 0 is exactly the shop above.
"""

from __future__ import annotations

import functools
import random
import re
from datetime import date, timedelta

from pydantic import BaseModel, ConfigDict

from trajforge.envs.web.shop.worlds import ShopNames, shop_names


class CategorySpec(BaseModel):
    """One product category of the vocabulary."""

    model_config = ConfigDict(frozen=True)

    name: str
    noun: str
    """Last word of every product name in the category ("Northpeak Aero Runner")."""
    colors: tuple[str, ...]
    sizes: tuple[str, ...] = ()
    """Ordered size scale; empty for one-size products."""
    price: tuple[float, float]


CATEGORY_SPECS: tuple[CategorySpec, ...] = (
    CategorySpec(name="Running Shoes", noun="Runner",
                 colors=("black", "white", "red", "blue", "grey"),
                 sizes=("38", "39", "40", "41", "42", "43", "44", "45"), price=(45, 160)),
    CategorySpec(name="Rain Jackets", noun="Jacket",
                 colors=("black", "navy", "green", "yellow", "red"),
                 sizes=("XS", "S", "M", "L", "XL"), price=(60, 220)),
    CategorySpec(name="T-Shirts", noun="Tee", colors=("white", "black", "grey", "blue", "green"),
                 sizes=("XS", "S", "M", "L", "XL"), price=(9, 40)),
    CategorySpec(name="Backpacks", noun="Backpack",
                 colors=("black", "grey", "green", "navy", "orange"), price=(25, 140)),
    CategorySpec(name="Headphones", noun="Headphones", colors=("black", "white", "silver", "blue"),
                 price=(19, 320)),
    CategorySpec(name="Desk Lamps", noun="Lamp", colors=("black", "white", "brass", "silver"),
                 price=(15, 130)),
    CategorySpec(name="Coffee Mugs", noun="Mug", colors=("white", "black", "blue", "green", "red"),
                 price=(6, 35)),
    CategorySpec(name="Yoga Mats", noun="Mat", colors=("purple", "blue", "green", "black", "pink"),
                 price=(15, 90)),
    CategorySpec(name="Water Bottles", noun="Bottle",
                 colors=("blue", "green", "black", "white", "orange"), price=(8, 45)),
    CategorySpec(name="Wrist Watches", noun="Watch", colors=("black", "silver", "gold", "brown"),
                 price=(40, 400)),
)
CATEGORIES: tuple[str, ...] = tuple(c.name for c in CATEGORY_SPECS)
BRANDS: tuple[str, ...] = ("Northpeak", "Altura", "Kestrel", "Lumo", "Vanta", "Orbis", "Tidewell",
                           "Fenwick", "Solano", "Brightline", "Marlowe", "Quillon")
MODELS: tuple[str, ...] = ("Aero", "Summit", "Drift", "Pulse", "Terra", "Nova", "Flux", "Crest",
                           "Echo", "Ridge", "Sierra", "Zephyr", "Vista", "Apex", "Breeze", "Harbor")
CLASS_NAMES: tuple[str, ...] = ("Espresso Basics", "Bike Repair 101", "Intro to Bouldering",
                                "Trail Running Clinic", "Watercolor Sketching", "Sourdough Baking",
                                "Beginner Yoga", "Knife Skills")
FIRST_NAMES: tuple[str, ...] = ("Ana", "Ben", "Clara", "David", "Elena", "Felix", "Greta", "Hugo",
                                "Ines", "Jonas", "Katrin", "Luca", "Maria", "Nils", "Olivia",
                                "Pablo", "Rosa", "Sven", "Tara", "Vera")
LAST_NAMES: tuple[str, ...] = ("Silva", "Novak", "Rossi", "Schmidt", "Dubois", "Garcia", "Murphy",
                               "Jansen", "Weber", "Costa", "Fischer", "Moreau", "Keller", "Walsh",
                               "Bakker", "Lopez", "Bauer", "Conti", "Lambert", "Vogel")
STREETS: tuple[str, ...] = ("Harbour Road", "Mill Lane", "Station Street", "Park Avenue",
                            "Church Street", "Bridge Road", "Market Square", "Orchard Way")
CITIES: tuple[str, ...] = ("Cork", "Lyon", "Porto", "Utrecht", "Graz", "Turin", "Hamburg",
                           "Valencia")

PRODUCTS_PER_CATEGORY = 12
OUT_OF_STOCK_RATE = 0.08
FIRST_CLASS_DAY = date(2025, 6, 2)
"""Class sessions fall in the four weeks from this Monday."""
CLASS_HOURS: tuple[str, ...] = ("10:00", "14:00", "18:30")


class Product(BaseModel):
    """One product for sale."""

    model_config = ConfigDict(frozen=True)

    id: str
    """URL slug, e.g. ``northpeak-aero-runner``."""
    name: str
    category: str
    brand: str
    colors: tuple[str, ...]
    sizes: tuple[str, ...]
    """Sizes on offer (a contiguous run of the category's scale); empty for one-size products."""
    price: float
    rating: float
    reviews: int
    stock: int
    description: str


class ClassSession(BaseModel):
    """One dated session of a workshop class."""

    model_config = ConfigDict(frozen=True)

    id: str
    """``2025-06-14T10:00``: the value the booking form submits."""
    seats_left: int
    """Free seats before any booking in this episode."""

    @property
    def label(self) -> str:
        day = date.fromisoformat(self.id[:10])
        return f"{day.strftime('%a %d %b %Y')}, {self.id[11:]}"


class WorkshopClass(BaseModel):
    """A bookable class with a few sessions."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    price: float
    """Per seat."""
    sessions: tuple[ClassSession, ...]
    description: str


class Account(BaseModel):
    """The signed-in shopper whose details prefill the checkout form."""

    model_config = ConfigDict(frozen=True)

    name: str
    address: str
    city: str


class Catalog(BaseModel):
    """Everything the shop sells for one seed (in one world)."""

    model_config = ConfigDict(frozen=True)

    seed: int
    products: tuple[Product, ...]
    classes: tuple[WorkshopClass, ...]
    account: Account
    world: int = 0
    """Which world's vocabularies (``worlds.py``; 0: the ones above)."""
    specs: tuple[CategorySpec, ...] = CATEGORY_SPECS
    """The categories this shop sells, in menu order."""

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.specs)

    def category_spec(self, name: str) -> CategorySpec:
        """A category of this shop by name or slug; KeyError when it sells none such."""
        return category_spec(name, self.specs)

    @functools.cached_property
    def _products_by_id(self) -> dict[str, Product]:
        return {p.id: p for p in self.products}

    def product(self, pid: str) -> Product | None:
        return self._products_by_id.get(pid)

    def product_named(self, name: str) -> Product | None:
        return next((p for p in self.products if p.name == name), None)

    def workshop(self, cid: str) -> WorkshopClass | None:
        return next((c for c in self.classes if c.id == cid), None)

    def in_category(self, category: str) -> list[Product]:
        return [p for p in self.products if p.category == category]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def category_spec(name: str, specs: tuple[CategorySpec, ...] = CATEGORY_SPECS) -> CategorySpec:
    for spec in specs:
        if spec.name == name or slug(spec.name) == name:
            return spec
    raise KeyError(f"unknown category {name!r}")


ORIGINAL_NAMES = ShopNames(
    categories=tuple(c.model_dump() for c in CATEGORY_SPECS), brands=BRANDS, models=MODELS,
    classes=CLASS_NAMES, first_names=FIRST_NAMES, last_names=LAST_NAMES, streets=STREETS, cities=CITIES)
"""World 0's vocabularies, as ``worlds.py`` takes them."""


@functools.lru_cache(maxsize=64)
def world_names(world: int = 0) -> ShopNames:
    """The vocabularies of ``world`` (0: the ones above)."""
    return shop_names(world, ORIGINAL_NAMES)


def world_specs(world: int = 0) -> tuple[CategorySpec, ...]:
    """The categories ``world``'s shop sells."""
    return CATEGORY_SPECS if world == 0 else tuple(CategorySpec(**c) for c in world_names(world).categories)


@functools.lru_cache(maxsize=16)
def build_catalog(seed: int, world: int = 0) -> Catalog:
    """The catalog for ``seed`` in ``world`` (cached: it is immutable and shared by every
    session). World 0 draws from ``random.Random(seed)`` as it always did; another world from its
    own stream."""
    rng = random.Random(seed) if world == 0 else random.Random(f"shop|{seed}|{world}")
    names = world_names(world)
    specs = world_specs(world)
    products = [p for spec in specs for p in _products(rng, spec, names)]
    classes = [_workshop(rng, name) for name in names.classes]
    account = Account(name=f"{rng.choice(names.first_names)} {rng.choice(names.last_names)}",
                      address=f"{rng.randint(1, 99)} {rng.choice(names.streets)}",
                      city=rng.choice(names.cities))
    return Catalog(seed=seed, products=tuple(products), classes=tuple(classes), account=account,
                   world=world, specs=specs)


def _products(rng: random.Random, spec: CategorySpec, names: ShopNames) -> list[Product]:
    # Distinct (brand, model) pairs keep names unique; the noun keeps them unique across
    # categories.
    pairs: list[tuple[str, str]] = []
    while len(pairs) < PRODUCTS_PER_CATEGORY:
        pair = (rng.choice(names.brands), rng.choice(names.models))
        if pair not in pairs:
            pairs.append(pair)
    out = []
    lo, hi = spec.price
    for brand, model in pairs:
        name = f"{brand} {model} {spec.noun}"
        colors = tuple(sorted(rng.sample(spec.colors, rng.randint(1, 3)),
                              key=spec.colors.index))
        sizes: tuple[str, ...] = ()
        if spec.sizes:
            start = rng.randint(0, len(spec.sizes) - 3)
            sizes = spec.sizes[start:rng.randint(start + 3, len(spec.sizes))]
        price = int(rng.uniform(lo, hi)) + rng.choice((0.25, 0.49, 0.5, 0.95, 0.99))
        stock = 0 if rng.random() < OUT_OF_STOCK_RATE else rng.randint(1, 30)
        adjective = rng.choice(("lightweight", "durable", "everyday", "premium", "compact",
                                "versatile"))
        out.append(Product(
            id=slug(name), name=name, category=spec.name, brand=brand, colors=colors,
            sizes=sizes, price=round(price, 2), rating=round(rng.uniform(2.8, 5.0), 1),
            reviews=rng.randint(3, 900), stock=stock,
            description=f"A {adjective} {spec.noun.lower()} by {brand}."))
    return out


def _workshop(rng: random.Random, name: str) -> WorkshopClass:
    days = sorted(rng.sample(range(28), 4))
    sessions = []
    for d in days:
        day = FIRST_CLASS_DAY + timedelta(days=d)
        hour = rng.choice(CLASS_HOURS)
        # Some sessions nearly full, so "earliest session with N free seats" questions skip some.
        seats = rng.choice((0, 1, 2, 3, 5, 6, 8, 10))
        sessions.append(ClassSession(id=f"{day.isoformat()}T{hour}", seats_left=seats))
    price = int(rng.uniform(15, 70)) + 0.0
    return WorkshopClass(id=slug(name), name=name, price=price, sessions=tuple(sessions),
                         description=f"A hands-on {name.lower()} class in our workshop room.")
