"""A small, realistic retail SQLite database, built deterministically from a seed.

``ensure_db(seed)`` builds ``retail-{seed}.sqlite`` once in the cache dir
(``$TRAJFORGE_HOME`` or ``~/.cache/trajforge``, subdir ``sql``) and returns its path. Everything
comes from ``random.Random(seed)`` and the vocabularies below, so the same seed always yields the
same rows: task answers computed at generation time stay valid on any machine.

Vocabulary values never contain quotes, commas or the word "and", so SQL literals need no escaping
and list answers split cleanly.
"""

from __future__ import annotations

import os
import random
import sqlite3
import tempfile
from datetime import date, timedelta
from pathlib import Path

DB_VERSION = 1
"""Stored as ``PRAGMA user_version``; bump it when the generator changes so caches rebuild."""

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


def cache_dir() -> Path:
    """Where generated databases live: ``$TRAJFORGE_HOME/sql`` or ``~/.cache/trajforge/sql``."""
    home = os.environ.get("TRAJFORGE_HOME") or Path.home() / ".cache" / "trajforge"
    return Path(home) / "sql"


def db_path(seed: int) -> Path:
    return cache_dir() / f"retail-{seed}.sqlite"


def ensure_db(seed: int) -> Path:
    """Path of the retail database for ``seed``, building it on first use.

    The file is written under a temporary name and moved into place with ``os.replace``, so a
    reader never sees a half-built database even when several processes race to build it.
    """
    path = db_path(seed)
    if path.exists() and _version(path) == DB_VERSION:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        build_db(Path(tmp), seed)
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


def build_db(path: Path, seed: int) -> None:
    """Write the whole database for ``seed`` into ``path`` (which must be empty or absent)."""
    rng = random.Random(seed)
    customers = _customers(rng)
    products = _products(rng)
    orders = _orders(rng, customers)
    items = _order_items(rng, orders, products)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO customers VALUES (?,?,?,?,?,?)", customers)
        conn.executemany("INSERT INTO products VALUES (?,?,?,?,?)", products)
        conn.executemany("INSERT INTO orders VALUES (?,?,?,?)", orders)
        conn.executemany("INSERT INTO order_items VALUES (?,?,?,?,?)", items)
        conn.execute(f"PRAGMA user_version = {DB_VERSION}")
        conn.commit()
    finally:
        conn.close()


def _customers(rng: random.Random) -> list[tuple]:
    names = rng.sample([f"{f} {l}" for f in FIRST_NAMES for l in LAST_NAMES], N_CUSTOMERS)
    # A guaranteed floor per city, the rest spread at random, then shuffled so ids don't
    # reveal the city.
    cities = [c for c in CITIES for _ in range(MIN_PER_CITY)]
    cities += [rng.choice(list(CITIES)) for _ in range(N_CUSTOMERS - len(cities))]
    rng.shuffle(cities)
    rows = []
    for i, (name, city) in enumerate(zip(names, cities), start=1):
        tier = rng.choices(TIERS, weights=(55, 30, 15))[0]
        rows.append((i, name, city, CITIES[city], rng.randint(2018, 2024), tier))
    return rows


def _products(rng: random.Random) -> list[tuple]:
    rows: list[tuple] = []
    used_prices: set[float] = set()
    for category, (names, (lo, hi)) in CATALOG.items():
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
