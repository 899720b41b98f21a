"""A small, realistic retail SQLite database, built deterministically from a seed.

``ensure_db(seed)`` builds ``retail-{seed}.sqlite`` once in the cache dir
(``$TRAJFORGE_HOME`` or ``~/.cache/trajforge``, subdir ``sql``) and returns its path. Everything
comes from ``random.Random(seed)`` and the vocabularies below, so the same seed always yields the
same rows: task answers computed at generation time stay valid on any machine.

Vocabulary values never contain quotes, commas or the word "and", so SQL literals need no escaping
and list answers split cleanly.

A ``RetailWorld`` is the vocabulary and the table and column names one database is built with;
``ORIGINAL`` (world 0) is the vocabulary below under the names in ``SCHEMA``, and
``ensure_db(seed)`` builds exactly what it always did. Other worlds (renamed cities, categories,
products; in schema worlds tables and columns) come from ``trajforge.envs.sql.worlds``.
"""

from __future__ import annotations

import os
import random
import sqlite3
import re
import tempfile
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

SQL_LITERAL = re.compile(r"('(?:[^']|'')*')")
"""An SQL string literal: split on it, a text's literals are its odd parts."""

DB_VERSION = 2
"""Stored as ``PRAGMA user_version``; bump it when the generator changes so caches rebuild (2: worlds
1..999 keep world 0's tables and columns, where version 1 renamed them in the same files)."""

# city -> country; two cities per country so country-level questions group several cities.
CITIES: dict[str, str] = {
    "Lyon": "France", "Marseille": "France",
    "Berlin": "Germany", "Hamburg": "Germany",
    "Madrid": "Spain", "Valencia": "Spain",
    "Milan": "Italy", "Turin": "Italy",
    "Amsterdam": "Netherlands", "Utrecht": "Netherlands",
    "Dublin": "Ireland", "Cork": "Ireland",
    "Lisbon": "Portugal", "Porto": "Portugal",
    "Vienna": "Austria", "Graz": "Austria",
}
COUNTRIES: tuple[str, ...] = tuple(dict.fromkeys(CITIES.values()))

# category -> (products, price range). Realistic names, distinct across categories.
CATALOG: dict[str, tuple[tuple[str, ...], tuple[float, float]]] = {
    "Sports": (("Trail Running Shoes", "Yoga Mat", "Tennis Racket", "Cycling Helmet",
                "Resistance Bands", "Swimming Goggles", "Dumbbell Set", "Climbing Rope"),
               (12.0, 160.0)),
    "Electronics": (("Wireless Earbuds", "Bluetooth Speaker", "USB-C Charger", "Smart Watch",
                     "E-Reader", "Portable SSD", "Webcam", "Noise Cancelling Headphones"),
                    (15.0, 350.0)),
    "Kitchen": (("Cast Iron Skillet", "French Press", "Espresso Machine", "Cutting Board",
                 "Stand Mixer", "Toaster", "Blender", "Chef Knife"),
                (9.0, 420.0)),
    "Clothing": (("Rain Jacket", "Wool Sweater", "Denim Jeans", "Cotton T-Shirt",
                  "Winter Gloves", "Baseball Cap", "Silk Scarf", "Hiking Socks"),
                 (8.0, 180.0)),
    "Beauty": (("Face Moisturizer", "Lip Balm", "Shampoo", "Sunscreen", "Hair Dryer",
                "Perfume", "Nail Polish", "Bath Salts"),
               (4.0, 120.0)),
    "Office": (("Desk Lamp", "Fountain Pen", "Office Chair", "Stapler", "Whiteboard",
                "Desk Organizer", "Paper Shredder", "Notebook"),
               (3.0, 260.0)),
    "Garden": (("Garden Hose", "Pruning Shears", "Watering Can", "Seed Starter Kit",
                "Lawn Mower", "Hedge Trimmer", "Bird Feeder", "Compost Bin"),
               (6.0, 380.0)),
    "Toys": (("Building Blocks", "Jigsaw Puzzle", "Plush Bear", "Remote Control Car",
              "Board Game", "Kite", "Toy Train", "Modeling Clay"),
             (5.0, 90.0)),
}
CATEGORIES: tuple[str, ...] = tuple(CATALOG)
PRODUCTS: dict[str, str] = {p: cat for cat, (names, _) in CATALOG.items() for p in names}
"""product name -> category."""

STATUSES: tuple[str, ...] = ("pending", "shipped", "delivered", "cancelled")
TIERS: tuple[str, ...] = ("bronze", "silver", "gold")

FIRST_NAMES: tuple[str, ...] = (
    "Ana", "Ben", "Clara", "David", "Elena", "Felix", "Greta", "Hugo", "Ines", "Jonas", "Katrin",
    "Luca", "Maria", "Nils", "Olivia", "Pablo", "Quinn", "Rosa", "Sven", "Tara", "Umberto",
    "Vera", "Walter", "Xenia", "Yusuf", "Zoe", "Marco", "Lena", "Tomas", "Sofia",
)
LAST_NAMES: tuple[str, ...] = (
    "Silva", "Novak", "Rossi", "Schmidt", "Dubois", "Garcia", "Murphy", "Jansen", "Weber",
    "Costa", "Fischer", "Moreau", "Romano", "Keller", "Walsh", "Bakker", "Lopez", "Bauer",
    "Ferreira", "Conti", "Lambert", "Brennan", "Vogel", "Santos", "Ricci", "Meyer", "Blanc",
    "Kelly", "Visser", "Navarro",
)

N_CUSTOMERS = 120
N_ORDERS = 300
MIN_PER_CITY = 5
"""Every city gets at least this many customers so per-city questions have real answers."""

SCHEMA = """
CREATE TABLE customers (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL, country TEXT NOT NULL,
  signup_year INTEGER NOT NULL, tier TEXT NOT NULL);
CREATE TABLE products (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, price REAL NOT NULL,
  stock INTEGER NOT NULL);
CREATE TABLE orders (
  id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
  order_date TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE order_items (
  id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id),
  product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL,
  unit_price REAL NOT NULL);
"""

TABLES: tuple[str, ...] = tuple(re.findall(r"CREATE TABLE (\w+)", SCHEMA))
"""World 0's table names, in schema order."""


Category = tuple[tuple[str, ...], tuple[float, float]]
"""A category's products and price range."""


@dataclass(frozen=True)
class RetailWorld:
    """The names one retail database is built with: its vocabulary, and its tables and columns."""

    number: int
    """The world's number (0: the original)."""
    cities: dict[str, str]
    """city -> country."""
    catalog: dict[str, Category]
    """category -> (products, price range)."""
    tables: dict[str, str] = field(default_factory=dict)
    """Original table name -> this world's (names not listed are unchanged)."""
    columns: dict[str, str] = field(default_factory=dict)
    """Original column name -> this world's; only names no two tables share, so a rename never
    needs to know which table a column belongs to."""

    @property
    def countries(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.cities.values()))

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(self.catalog)

    @property
    def products(self) -> dict[str, str]:
        """product name -> category."""
        return {p: cat for cat, (names, _) in self.catalog.items() for p in names}

    def sql(self, text: str) -> str:
        """``text`` (SQL written with the original names) with this world's table and column names;
        quoted literals are left alone, so an entity value never changes."""
        names = {**self.tables, **self.columns}
        if not names:
            return text
        parts = SQL_LITERAL.split(text)
        return "".join(p if i % 2 else _renamed(p, names) for i, p in enumerate(parts))

    def prose(self, text: str) -> str:
        """``text`` (the expert's words, naming tables) with this world's table names."""
        return _renamed(text, self.tables) if self.tables else text


def _renamed(text: str, names: dict[str, str]) -> str:
    """Every whole word of ``text`` that ``names`` has, replaced (longest names first)."""
    word = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b")
    return word.sub(lambda m: names[m.group(1)], text)


ORIGINAL = RetailWorld(number=0, cities=CITIES, catalog=CATALOG)
"""World 0: the vocabulary above, the tables of ``SCHEMA``."""


def cache_dir() -> Path:
    """Where generated databases live: ``$TRAJFORGE_HOME/sql`` or ``~/.cache/trajforge/sql``."""
    home = os.environ.get("TRAJFORGE_HOME") or Path.home() / ".cache" / "trajforge"
    return Path(home) / "sql"


def db_path(seed: int, world: RetailWorld = ORIGINAL) -> Path:
    """``retail-{seed}.sqlite`` for world 0, ``retail-{seed}-w{number}.sqlite`` for another."""
    suffix = f"-w{world.number}" if world.number else ""
    return cache_dir() / f"retail-{seed}{suffix}.sqlite"


def ensure_db(seed: int, world: RetailWorld = ORIGINAL) -> Path:
    """Path of the retail database for ``seed`` (in ``world``), building it on first use.

    The file is written under a temporary name and moved into place with ``os.replace``, so a
    reader never sees a half-built database even when several processes race to build it.
    """
    path = db_path(seed, world)
    if path.exists() and _version(path) == DB_VERSION:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        build_db(Path(tmp), seed, world)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _version(path: Path) -> int | None:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            return conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error:
        return None  # unreadable or corrupt: rebuild


def build_db(path: Path, seed: int, world: RetailWorld = ORIGINAL) -> None:
    """Write the whole database for ``seed`` (in ``world``) into ``path`` (empty or absent).

    World 0 draws from ``random.Random(seed)`` as it always did; another world from its own
    stream, so its rows differ as well as its names."""
    rng = random.Random(seed) if world.number == 0 else random.Random(f"retail|{seed}|{world.number}")
    customers = _customers(rng, world.cities)
    products = _products(rng, world.catalog)
    orders = _orders(rng, customers)
    items = _order_items(rng, orders, products)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(world.sql(SCHEMA))
        conn.executemany(world.sql("INSERT INTO customers VALUES (?,?,?,?,?,?)"), customers)
        conn.executemany(world.sql("INSERT INTO products VALUES (?,?,?,?,?)"), products)
        conn.executemany(world.sql("INSERT INTO orders VALUES (?,?,?,?)"), orders)
        conn.executemany(world.sql("INSERT INTO order_items VALUES (?,?,?,?,?)"), items)
        conn.execute(f"PRAGMA user_version = {DB_VERSION}")
        conn.commit()
    finally:
        conn.close()


def _customers(rng: random.Random, cities: dict[str, str]) -> list[tuple]:
    names = rng.sample([f"{f} {l}" for f in FIRST_NAMES for l in LAST_NAMES], N_CUSTOMERS)
    # A guaranteed floor per city, the rest spread at random, then shuffled so ids don't
    # reveal the city.
    drawn = [c for c in cities for _ in range(MIN_PER_CITY)]
    drawn += [rng.choice(list(cities)) for _ in range(N_CUSTOMERS - len(drawn))]
    rng.shuffle(drawn)
    rows = []
    for i, (name, city) in enumerate(zip(names, drawn), start=1):
        tier = rng.choices(TIERS, weights=(55, 30, 15))[0]
        rows.append((i, name, city, cities[city], rng.randint(2018, 2024), tier))
    return rows


def _products(rng: random.Random, catalog: dict[str, Category]) -> list[tuple]:
    rows: list[tuple] = []
    used_prices: set[float] = set()
    for category, (names, (lo, hi)) in catalog.items():
        for name in names:
            # Distinct prices so "most expensive" questions never tie.
            price = round(rng.uniform(lo, hi), 2)
            while price in used_prices:
                price = round(rng.uniform(lo, hi), 2)
            used_prices.add(price)
            rows.append((len(rows) + 1, name, category, price, rng.randint(0, 200)))
    return rows


def _orders(rng: random.Random, customers: list[tuple]) -> list[tuple]:
    # ~15% of customers never order (so "never ordered" questions have answers) and the rest
    # order with uneven frequency, like real shoppers.
    buyers = [c[0] for c in customers if rng.random() > 0.15]
    weights = [rng.uniform(0.3, 3.0) for _ in buyers]
    start, days = date(2022, 1, 1), (date(2024, 12, 31) - date(2022, 1, 1)).days
    dates = sorted(start + timedelta(days=rng.randint(0, days)) for _ in range(N_ORDERS))
    rows = []
    for i, day in enumerate(dates, start=1):
        customer = rng.choices(buyers, weights=weights)[0]
        status = rng.choices(STATUSES, weights=(8, 15, 67, 10))[0]
        rows.append((i, customer, day.isoformat(), status))
    return rows


def _order_items(rng: random.Random, orders: list[tuple], products: list[tuple]) -> list[tuple]:
    rows = []
    for order in orders:
        for product in rng.sample(products, rng.choices((1, 2, 3, 4), weights=(25, 35, 25, 15))[0]):
            quantity = rng.choices((1, 2, 3, 4), weights=(60, 25, 10, 5))[0]
            # unit_price is the price paid, sometimes discounted, so it can differ from price.
            discount = 0.9 if rng.random() < 0.2 else 1.0
            rows.append((len(rows) + 1, order[0], product[0], quantity,
                         round(product[3] * discount, 2)))
    return rows
