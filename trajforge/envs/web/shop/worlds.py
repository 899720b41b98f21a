"""The shop's worlds: the same site selling other categories, brands and models, other classes.

World 0 is the shop every existing task was made on (the vocabularies of ``catalog.py``). World
``w`` > 0 draws, from ``random.Random("web-world|w")``, its vocabularies from world 0's seen
values plus the pools below: 10 categories (each with its product noun, colors, sizes and price
range), 12 brands, 16 model names, 8 workshop classes, and the first names, last names, streets
and cities its shoppers and addresses use. ``build_catalog(seed, w)`` then draws its products and
sessions from them. No world > 0 holds a held-out category, brand or class of world 0 (they are
left out of what a world draws from, and no pool value contains one), so no product of a held-out
category or brand exists there either; ``tests/tasks/test_worlds.py`` checks every world it
builds. The shop's name and page layout are the same in every world.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

HELDOUT_CATEGORIES: tuple[str, ...] = ("Water Bottles", "Wrist Watches")
HELDOUT_BRANDS: tuple[str, ...] = ("Solano", "Marlowe")
HELDOUT_CLASSES: tuple[str, ...] = ("Sourdough Baking", "Knife Skills")
"""World 0's held-out values (``templates.py`` keeps them out of train and test); in no world > 0."""

CATEGORY_POOL: tuple[dict[str, Any], ...] = (
    {"name": "Hiking Boots", "noun": "Boot", "colors": ("brown", "black", "grey", "green"),
     "sizes": ("38", "39", "40", "41", "42", "43", "44", "45"), "price": (70, 240)},
    {"name": "Sunglasses", "noun": "Shades", "colors": ("black", "brown", "gold", "silver"),
     "price": (15, 220)},
    {"name": "Umbrellas", "noun": "Umbrella", "colors": ("black", "navy", "red", "yellow"),
     "price": (9, 60)},
    {"name": "Wallets", "noun": "Wallet", "colors": ("black", "brown", "tan", "navy"), "price": (12, 120)},
    {"name": "Scarves", "noun": "Scarf", "colors": ("grey", "red", "navy", "cream", "green"),
     "price": (10, 80)},
    {"name": "Bike Helmets", "noun": "Helmet", "colors": ("black", "white", "red", "blue"),
     "sizes": ("S", "M", "L", "XL"), "price": (30, 180)},
    {"name": "Tea Kettles", "noun": "Kettle", "colors": ("silver", "black", "red", "white"),
     "price": (18, 110)},
    {"name": "Notebooks", "noun": "Notebook", "colors": ("black", "blue", "red", "green", "grey"),
     "price": (4, 30)},
    {"name": "Beanies", "noun": "Beanie", "colors": ("grey", "black", "navy", "orange", "green"),
     "price": (8, 40)},
    {"name": "Lunch Boxes", "noun": "Lunchbox", "colors": ("blue", "green", "pink", "black"),
     "price": (8, 45)},
    {"name": "Camp Chairs", "noun": "Chair", "colors": ("green", "blue", "black", "orange"),
     "price": (20, 120)},
    {"name": "Phone Cases", "noun": "Case", "colors": ("black", "blue", "red", "pink", "green"),
     "price": (8, 50)},
)
"""Categories a world may sell besides world 0's seen ones (``CategorySpec`` fields)."""
BRAND_POOL: tuple[str, ...] = ("Cobalt", "Everline", "Halcyon", "Juniper", "Larkspur", "Meridian",
                               "Nimbus", "Pinecrest", "Saltmarsh", "Tamarack", "Wexford", "Yarrow",
                               "Zenith", "Ashgrove")
MODEL_POOL: tuple[str, ...] = ("Atlas", "Bolt", "Cirrus", "Dune", "Ember", "Fjord", "Glacier",
                               "Horizon", "Ion", "Jetty", "Lumen", "Mesa", "Nomad", "Orbit", "Prism",
                               "Quartz", "Rover", "Strata", "Tundra", "Vector")
CLASS_POOL: tuple[str, ...] = ("Pottery Wheel Basics", "Candle Making", "Climbing Knots",
                               "Pasta From Scratch", "Urban Sketching", "Bike Maintenance",
                               "Map Reading", "Cocktail Basics", "Kombucha Brewing", "Calligraphy",
                               "Houseplant Care", "Camp Cooking")
FIRST_NAME_POOL: tuple[str, ...] = ("Amir", "Bea", "Carlos", "Dana", "Emil", "Fatima", "Gabriel",
                                    "Hanna", "Ivan", "Julia", "Kofi", "Leila", "Mateo", "Nora",
                                    "Oscar", "Paula", "Ravi", "Selin", "Theo", "Yara")
LAST_NAME_POOL: tuple[str, ...] = ("Andersen", "Byrne", "Castro", "Duval", "Eriksen", "Fontaine",
                                   "Gallo", "Hoffmann", "Ivanova", "Jensen", "Kowalski", "Lindqvist",
                                   "Marino", "Nielsen", "Okafor", "Petrov", "Quinlan", "Rinaldi",
                                   "Sorensen", "Toth")
STREET_POOL: tuple[str, ...] = ("High Street", "Canal Walk", "Elm Grove", "Kings Road", "Quay Street",
                                "Garden Row", "Castle Hill", "Meadow Lane")
CITY_POOL: tuple[str, ...] = ("Ghent", "Bergen", "Aarhus", "Krakow", "Tartu", "Bologna", "Leeds",
                              "Salzburg")


class ShopNames(NamedTuple):
    """The vocabularies one world's shop is built from."""

    categories: tuple[dict[str, Any], ...]
    """``CategorySpec`` fields, one per category."""
    brands: tuple[str, ...]
    models: tuple[str, ...]
    classes: tuple[str, ...]
    first_names: tuple[str, ...]
    last_names: tuple[str, ...]
    streets: tuple[str, ...]
    cities: tuple[str, ...]


def shop_names(number: int, original: ShopNames) -> ShopNames:
    """World ``number``'s vocabularies (0: ``original``, world 0's); the same number gives the
    same names anywhere."""
    if number < 0:
        raise ValueError(f"a world number is 0 or more, not {number}")
    if number == 0:
        return original
    rng = random.Random(f"web-world|{number}")

    def pick(seen: tuple, pool: tuple, k: int) -> tuple:
        return tuple(rng.sample(list(seen) + list(pool), k))

    categories = tuple(c for c in original.categories if c["name"] not in HELDOUT_CATEGORIES)
    return ShopNames(
        categories=pick(categories, CATEGORY_POOL, len(original.categories)),
        brands=pick(tuple(b for b in original.brands if b not in HELDOUT_BRANDS), BRAND_POOL,
                    len(original.brands)),
        models=pick(original.models, MODEL_POOL, len(original.models)),
        classes=pick(tuple(c for c in original.classes if c not in HELDOUT_CLASSES), CLASS_POOL,
                     len(original.classes)),
        first_names=pick(original.first_names, FIRST_NAME_POOL, len(original.first_names)),
        last_names=pick(original.last_names, LAST_NAME_POOL, len(original.last_names)),
        streets=pick(original.streets, STREET_POOL, len(original.streets)),
        cities=pick(original.cities, CITY_POOL, len(original.cities)))


__all__ = ["BRAND_POOL", "CATEGORY_POOL", "CLASS_POOL", "HELDOUT_BRANDS", "HELDOUT_CATEGORIES",
           "HELDOUT_CLASSES", "ShopNames", "shop_names"]
