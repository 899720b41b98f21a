"""The SQL environment's worlds: the retail database with other names, other tables, other rows.

``retail_world(w)`` is world ``w``'s ``RetailWorld`` (``envs/sqldb.py``): world 0 is the original
(``ORIGINAL``, the database every existing task was made on). World ``w`` > 0 draws, from
``random.Random("sql-world|w")``:

* 8 countries with 2 cities each, from the seen countries of world 0 plus ``COUNTRY_POOL``;
* 8 categories with their 8 products and price range, from the seen categories of world 0 plus
  ``CATEGORY_POOL``;

and keeps world 0's tables and columns: a *vocabulary world* (1 ≤ w < ``SCHEMA_WORLDS``). World
``schema_world(k)`` (= ``SCHEMA_WORLDS`` + k) has world k's vocabulary and renames the schema too:
a name for each table (``customers`` may be ``clients``, ``shoppers``, ...; the foreign keys
follow: ``client_id``) and for the columns that only one table has (``city`` → ``town``,
``stock`` → ``units_in_stock``, ...), each possibly the original one.

Why vocabulary worlds are what ``synth --worlds`` draws: the held-out split asks about entities
training never named, in world 0's schema. Trained on the demo's pool plus 3 vocabulary worlds
(183 more tasks, the same 92 steps), the embedded model solved 126 of the 186 held-out tasks of
``benchmarks/recipes.py`` against 115 without them (15 fixed, 4 broken, McNemar p = 0.02): it
copies entities off the question instead of writing the ones it memorised (``'Shoppers'`` for
``Toys``). That gain did not replicate on a second seed (107 vs 105, p = 0.73; with 30% replay
112 vs 115 and 101 vs 119): README, "Worlds", second table. With two of four added worlds schema worlds (and the schema shown below each question)
it fell to 108, and with the train split spread over schema worlds alone to 46 (stop 22): a 135M
model learns to write other worlds' table and column names (README, "Worlds").

Its rows come from their own random stream (``build_db``), so counts and totals differ too. No
world > 0 holds a held-out country, city, category or product of world 0
(``tasks.HELDOUT_COUNTRIES``, ``HELDOUT_CATEGORIES``): the pools are written without them, and
``tests/tasks/test_worlds.py`` checks every world it builds, substrings included. Worlds > 0 serve
only the train split (``trajforge.tasks.worlds``), so all their values are "seen".
"""

from __future__ import annotations

import functools
import random
from pathlib import Path

from trajforge.envs.sqldb import CATALOG, CITIES, ORIGINAL, Category, RetailWorld, ensure_db

HELDOUT_COUNTRIES: tuple[str, ...] = ("Portugal", "Austria")
HELDOUT_CATEGORIES: tuple[str, ...] = ("Garden", "Toys")
"""World 0's held-out countries and categories (their cities and products too): never in a world
> 0. ``envs/sql/tasks.py`` holds them out of world 0's train and test splits."""

SCHEMA_WORLDS = 1000
"""Worlds numbered above this rename tables and columns as well (``schema_world``)."""
COUNTRIES_PER_WORLD = 8
CATEGORIES_PER_WORLD = 8

COUNTRY_POOL: dict[str, tuple[str, str]] = {
    "Belgium": ("Brussels", "Antwerp"), "Poland": ("Warsaw", "Krakow"),
    "Sweden": ("Stockholm", "Gothenburg"), "Denmark": ("Copenhagen", "Aarhus"),
    "Norway": ("Oslo", "Bergen"), "Finland": ("Helsinki", "Tampere"),
    "Czechia": ("Prague", "Brno"), "Hungary": ("Budapest", "Debrecen"),
    "Greece": ("Athens", "Thessaloniki"), "Switzerland": ("Zurich", "Geneva"),
    "Romania": ("Bucharest", "Timisoara"), "Slovenia": ("Ljubljana", "Maribor"),
    "Estonia": ("Tallinn", "Tartu"), "Lithuania": ("Vilnius", "Kaunas"),
    "Slovakia": ("Bratislava", "Kosice"), "United Kingdom": ("Manchester", "Edinburgh"),
    "Croatia": ("Zagreb", "Rijeka"), "Latvia": ("Riga", "Liepaja"),
}
"""Countries a world may have besides world 0's seen ones, two cities each."""

CATEGORY_POOL: dict[str, Category] = {
    "Pet Supplies": (("Dog Leash", "Cat Scratcher", "Pet Bed", "Aquarium Filter", "Chew Bone",
                      "Litter Box", "Pet Carrier", "Feeding Bowl"), (5.0, 140.0)),
    "Books": (("Cookbook", "Travel Guide", "Crime Novel", "Poetry Collection", "Road Atlas",
               "Graphic Novel", "Biography", "Dictionary"), (6.0, 60.0)),
    "Music": (("Acoustic Guitar", "Ukulele", "Digital Piano", "Drum Pad", "Violin", "Harmonica",
               "Guitar Strings", "Metronome"), (5.0, 600.0)),
    "Automotive": (("Car Vacuum", "Tire Inflator", "Jump Starter", "Dash Camera", "Seat Cover",
                    "Wiper Blades", "Car Wax", "Roof Box"), (8.0, 300.0)),
    "Baby": (("Baby Monitor", "Stroller", "High Chair", "Diaper Bag", "Baby Bottle", "Teething Ring",
              "Infant Car Seat", "Crib Mobile"), (6.0, 420.0)),
    "Home Decor": (("Photo Frame", "Wall Clock", "Throw Pillow", "Scented Candle", "Area Rug",
                    "Glass Vase", "Wall Mirror", "Table Lamp"), (7.0, 260.0)),
    "Camping": (("Dome Tent", "Sleeping Bag", "Camping Stove", "Headlamp", "Trekking Poles",
                 "Cooler Box", "Camp Chair", "Water Filter"), (8.0, 400.0)),
    "Bedding": (("Duvet Cover", "Fitted Sheet", "Memory Foam Pillow", "Weighted Blanket",
                 "Mattress Topper", "Bed Frame", "Quilt", "Pillowcase Set"), (10.0, 450.0)),
    "Jewelry": (("Silver Necklace", "Gold Ring", "Pearl Earrings", "Charm Bracelet", "Cufflinks",
                 "Brooch", "Anklet", "Pendant"), (15.0, 500.0)),
    "Luggage": (("Carry-On Suitcase", "Duffel Bag", "Garment Bag", "Travel Backpack", "Luggage Scale",
                 "Packing Cubes", "Passport Holder", "Toiletry Bag"), (6.0, 320.0)),
    "Photography": (("Tripod", "Camera Bag", "Lens Cleaning Kit", "Memory Card", "Ring Light",
                     "Camera Strap", "Lens Filter", "Flash Unit"), (6.0, 380.0)),
    "Gaming": (("Game Controller", "Gaming Mouse", "Mechanical Keyboard", "Gaming Headset",
                "Mouse Pad", "Gaming Chair", "Capture Card", "Controller Stand"), (7.0, 420.0)),
    "Health": (("Digital Thermometer", "Blood Pressure Monitor", "First Aid Kit", "Massage Gun",
                "Pill Organizer", "Heating Pad", "Posture Corrector", "Vitamin Pack"), (5.0, 220.0)),
    "Art Supplies": (("Watercolor Set", "Sketchbook", "Acrylic Paints", "Easel", "Paintbrush Set",
                      "Charcoal Pencils", "Canvas Panels", "Palette Knife"), (4.0, 150.0)),
    "Hardware": (("Cordless Drill", "Tape Measure", "Screwdriver Set", "Spirit Level", "Claw Hammer",
                  "Socket Wrench", "Utility Knife", "Stud Finder"), (5.0, 230.0)),
    "Pantry": (("Olive Oil", "Basmati Rice", "Maple Syrup", "Dark Chocolate", "Green Tea",
                "Ground Coffee", "Honey Jar", "Pasta Sauce"), (2.0, 40.0)),
}
"""Categories a world may have besides world 0's seen ones: realistic products, none repeating a
name of world 0 or of another pool category."""

TABLE_NAMES: dict[str, tuple[tuple[str, str], ...]] = {
    "customers": (("customers", "customer"), ("clients", "client"), ("shoppers", "shopper"),
                  ("members", "member")),
    "products": (("products", "product"), ("items", "item"), ("articles", "article"),
                 ("listings", "listing")),
    "orders": (("orders", "order"), ("purchases", "purchase"), ("sales", "sale")),
}
"""(table, singular) a world may call each table; the foreign key is ``<singular>_id``."""
LINE_TABLE = ("{order}_items", "{order}_lines", "line_items")
"""What the order-lines table may be called (``{order}``: the orders table's singular)."""
COLUMN_NAMES: dict[str, tuple[str, ...]] = {
    "city": ("city", "town"),
    "signup_year": ("signup_year", "joined_year", "member_since"),
    "tier": ("tier", "loyalty_tier"),
    "category": ("category", "department"),
    "price": ("price", "list_price"),
    "stock": ("stock", "units_in_stock", "on_hand"),
    "order_date": ("order_date", "placed_on"),
    "quantity": ("quantity", "qty"),
    "unit_price": ("unit_price", "price_paid"),
}
"""Names a world may give the columns only one table has (``name``, ``id`` stay)."""


def seen_cities() -> dict[str, str]:
    """World 0's cities outside the held-out countries."""
    return {c: k for c, k in CITIES.items() if k not in HELDOUT_COUNTRIES}


def seen_catalog() -> dict[str, Category]:
    """World 0's categories outside the held-out ones."""
    return {c: v for c, v in CATALOG.items() if c not in HELDOUT_CATEGORIES}


def schema_world(k: int) -> int:
    """The number of the world with world ``k``'s vocabulary whose tables and columns are renamed
    too (``k`` ≥ 1: world 0's vocabulary holds the held-out entities)."""
    if not 1 <= k < SCHEMA_WORLDS:
        raise ValueError(f"schema worlds take a vocabulary world 1..{SCHEMA_WORLDS - 1}, not {k}")
    return SCHEMA_WORLDS + k


@functools.lru_cache(maxsize=64)
def retail_world(number: int) -> RetailWorld:
    """World ``number``'s names (0: ``ORIGINAL``); the same number gives the same world anywhere."""
    if number < 0 or number == SCHEMA_WORLDS:
        raise ValueError(f"a world number is 0, 1..{SCHEMA_WORLDS - 1} or a schema world above "
                         f"{SCHEMA_WORLDS}, not {number}")
    if number == 0:
        return ORIGINAL
    vocabulary = number % SCHEMA_WORLDS
    # One stream per vocabulary world: its schema world draws the same names, then the schema's.
    rng = random.Random(f"sql-world|{vocabulary}")
    countries = {k: tuple(c for c, kk in seen_cities().items() if kk == k)
                 for k in dict.fromkeys(seen_cities().values())} | COUNTRY_POOL
    chosen = rng.sample(sorted(countries), COUNTRIES_PER_WORLD)
    cities = {city: k for k in chosen for city in countries[k]}
    categories = seen_catalog() | CATEGORY_POOL
    catalog = {c: categories[c] for c in rng.sample(sorted(categories), CATEGORIES_PER_WORLD)}
    schema = _schema_names(rng) if number > SCHEMA_WORLDS else {}
    return RetailWorld(number=number, cities=cities, catalog=catalog, **schema)


def _schema_names(rng: random.Random) -> dict[str, dict[str, str]]:
    """Table and column renames for one world (only the names that change)."""
    tables: dict[str, str] = {}
    columns: dict[str, str] = {}
    for table, options in TABLE_NAMES.items():
        name, singular = rng.choice(options)
        tables[table] = name
        columns[f"{table[:-1]}_id"] = f"{singular}_id"
    order = dict(TABLE_NAMES["orders"])[tables["orders"]]
    tables["order_items"] = rng.choice(LINE_TABLE).format(order=order)
    for column, options in COLUMN_NAMES.items():
        columns[column] = rng.choice(options)
    return {"tables": {k: v for k, v in tables.items() if k != v},
            "columns": {k: v for k, v in columns.items() if k != v}}


def world_db(seed: int, number: int = 0) -> Path:
    """The database file of world ``number`` for ``seed``, built on first use (world 0:
    ``ensure_db(seed)``, the very file it always was)."""
    return ensure_db(seed, retail_world(number))


__all__ = ["CATEGORY_POOL", "COLUMN_NAMES", "COUNTRY_POOL", "HELDOUT_CATEGORIES", "HELDOUT_COUNTRIES",
           "SCHEMA_WORLDS", "TABLE_NAMES", "retail_world", "schema_world", "seen_catalog", "seen_cities",
           "world_db"]
