"""A bring-your-own SQLite database and 240 questions, for benchmarks that need "a user's own data".

    python benchmarks/byo_fixture.py --out /tmp/byo      # shop.sqlite, questions.jsonl

The database looks like a small company's: six related tables, wide ones among them (so schema
descriptions and results make 2–5 KB trajectories, as users' data does), and questions of several
shapes (counts, sums, joins, lists) over entities drawn from the rows. ``build_store`` then runs the
flow a user runs (BYO questions to verified tasks, ``collect --policy expert``) and returns the
store folder.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

CITIES = ["Lyon", "Porto", "Gdansk", "Turin", "Ghent", "Leeds", "Malmo", "Brno", "Graz", "Cork",
          "Bilbao", "Utrecht"]
CATEGORIES = ["garden", "kitchen", "office", "toys", "sports", "audio", "lighting", "storage"]
BRANDS = ["Norda", "Velto", "Kumo", "Alder", "Brisa", "Taiga", "Orla", "Pike"]
EXTRA = ["loyalty_tier", "signup_channel", "preferred_language", "marketing_opt_in", "birth_year",
         "postal_code", "street", "phone_prefix", "account_manager", "credit_limit", "notes"]


def build_db(path: Path, seed: int = 0) -> Path:
    rng = random.Random(seed)
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(f"""
        CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT, country TEXT,
            {", ".join(f"{c} TEXT" for c in EXTRA)});
        CREATE TABLE suppliers (id INTEGER PRIMARY KEY, name TEXT, city TEXT, rating REAL);
        CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, category TEXT, brand TEXT,
            supplier_id INTEGER REFERENCES suppliers(id), price REAL, weight_kg REAL, stock INTEGER,
            color TEXT, warranty_months INTEGER, launched_year INTEGER, discontinued INTEGER);
        CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id),
            order_date TEXT, status TEXT, channel TEXT, total REAL);
        CREATE TABLE order_items (order_id INTEGER REFERENCES orders(id),
            product_id INTEGER REFERENCES products(id), quantity INTEGER, unit_price REAL);
        CREATE TABLE shipments (id INTEGER PRIMARY KEY, order_id INTEGER REFERENCES orders(id),
            carrier TEXT, shipped_date TEXT, delivered_date TEXT, cost REAL);
    """)
    customers = [(i, f"Customer {i:03d}", rng.choice(CITIES), "EU",
                  *[f"{c}-{rng.randrange(50)}" for c in EXTRA]) for i in range(1, 121)]
    conn.executemany(f"INSERT INTO customers VALUES ({', '.join('?' * (4 + len(EXTRA)))})", customers)
    conn.executemany("INSERT INTO suppliers VALUES (?, ?, ?, ?)",
                     [(i, f"Supplier {i}", rng.choice(CITIES), round(rng.uniform(2, 5), 1)) for i in range(1, 11)])
    products = [(i, f"{rng.choice(BRANDS)} {rng.choice(CATEGORIES)} item {i}", rng.choice(CATEGORIES),
                 rng.choice(BRANDS), rng.randint(1, 10), round(rng.uniform(3, 300), 2),
                 round(rng.uniform(0.1, 20), 1), rng.randint(0, 500), rng.choice(["red", "blue", "black"]),
                 rng.choice([6, 12, 24]), rng.randint(2015, 2025), int(rng.random() < 0.1))
                for i in range(1, 81)]
    conn.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", products)
    orders, items, ships = [], [], []
    for oid in range(1, 601):
        lines = [(oid, rng.randint(1, 80), rng.randint(1, 5), round(rng.uniform(3, 300), 2))
                 for _ in range(rng.randint(1, 4))]
        items += lines
        orders.append((oid, rng.randint(1, 120), f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                       rng.choice(["paid", "shipped", "returned", "cancelled"]), rng.choice(["web", "store", "phone"]),
                       round(sum(q * p for _, _, q, p in lines), 2)))
        ships.append((oid, oid, rng.choice(["DHL", "UPS", "GLS"]), "2025-06-01", "2025-06-04",
                      round(rng.uniform(3, 30), 2)))
    conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", orders)
    conn.executemany("INSERT INTO order_items VALUES (?, ?, ?, ?)", items)
    conn.executemany("INSERT INTO shipments VALUES (?, ?, ?, ?, ?, ?)", ships)
    conn.commit()
    conn.close()
    return path


def questions(n: int = 240, seed: int = 0) -> list[dict]:
    """``n`` distinct questions of thirteen shapes, each with gold SQL giving one value or one column."""
    rng = random.Random(seed)
    shapes = [
        lambda c, k, b, s: (f"How many customers live in {c}?", f"SELECT COUNT(*) FROM customers WHERE city = '{c}'"),
        lambda c, k, b, s: (f"How many {k} products are there?", f"SELECT COUNT(*) FROM products WHERE category = '{k}'"),
        lambda c, k, b, s: (f"What is the average price of {b} products?",
                            f"SELECT ROUND(AVG(price), 2) FROM products WHERE brand = '{b}'"),
        lambda c, k, b, s: (f"How many units of {k} products are in stock?",
                            f"SELECT SUM(stock) FROM products WHERE category = '{k}'"),
        lambda c, k, b, s: (f"How many orders did customers from {c} place?",
                            f"SELECT COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.city = '{c}'"),
        lambda c, k, b, s: (f"What is the total value of {s} orders from {c}?",
                            f"SELECT ROUND(SUM(o.total), 2) FROM orders o JOIN customers c ON c.id = o.customer_id "
                            f"WHERE c.city = '{c}' AND o.status = '{s}'"),
        lambda c, k, b, s: (f"Which suppliers are based in {c}?", f"SELECT name FROM suppliers WHERE city = '{c}'"),
        lambda c, k, b, s: (f"How many {b} {k} items were sold in total?",
                            f"SELECT COALESCE(SUM(i.quantity), 0) FROM order_items i JOIN products p ON p.id = i.product_id "
                            f"WHERE p.brand = '{b}' AND p.category = '{k}'"),
        lambda c, k, b, s: (f"What is the most expensive {k} product?",
                            f"SELECT name FROM products WHERE category = '{k}' ORDER BY price DESC LIMIT 1"),
        lambda c, k, b, s: (f"How many {s} orders were shipped by DHL to customers in {c}?",
                            f"SELECT COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id JOIN shipments s "
                            f"ON s.order_id = o.id WHERE c.city = '{c}' AND o.status = '{s}' AND s.carrier = 'DHL'"),
        lambda c, k, b, s: (f"What is the average shipping cost for orders from {c}?",
                            f"SELECT ROUND(AVG(s.cost), 2) FROM shipments s JOIN orders o ON o.id = s.order_id "
                            f"JOIN customers c ON c.id = o.customer_id WHERE c.city = '{c}'"),
        lambda c, k, b, s: (f"Which {b} products weigh more than 10 kg?",
                            f"SELECT name FROM products WHERE brand = '{b}' AND weight_kg > 10"),
        lambda c, k, b, s: (f"How many {k} items did customers in {c} order?",
                            f"SELECT COALESCE(SUM(i.quantity), 0) FROM order_items i JOIN products p ON p.id = i.product_id "
                            f"JOIN orders o ON o.id = i.order_id JOIN customers c ON c.id = o.customer_id "
                            f"WHERE p.category = '{k}' AND c.city = '{c}'"),
    ]
    if n > 300:
        raise ValueError("the shapes give about 320 distinct questions; ask for at most 300")
    seen, out = set(), []
    while len(out) < n:
        shape = rng.choice(shapes)
        q, sql = shape(rng.choice(CITIES), rng.choice(CATEGORIES), rng.choice(BRANDS),
                       rng.choice(["paid", "shipped", "returned"]))
        if q in seen:
            continue
        seen.add(q)
        out.append({"question": q, "sql": sql, "split": "train" if len(out) % 10 else "test"})
    return out


def build(out: Path, n: int = 240, seed: int = 0) -> tuple[Path, Path]:
    """(database, questions file) under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    db = build_db(out / "shop.sqlite", seed)
    qfile = out / "questions.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in questions(n, seed)))
    return db, qfile


def build_store(out: Path, n: int = 240, seed: int = 0) -> Path:
    """The user flow: synth from the database and questions, then collect expert trajectories."""
    from trajforge.tasks import write_tasks
    from trajforge.tasks.byo_sql import questions_to_tasks

    db, qfile = build(out, n, seed)
    # The library call keeps paraphrase-like questions that `synth`'s near-duplicate filter drops.
    write_tasks(out / "tasks.jsonl", questions_to_tasks(db, qfile).tasks)
    cli = [sys.executable, "-m", "trajforge.cli.main"]
    store = out / "store"
    subprocess.run([*cli, "collect", "--tasks", str(out / "tasks.jsonl"), "--policy", "expert",
                    "--out", str(store), "--split", "train"], check=True, capture_output=True)
    return store


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n", type=int, default=240)
    ap.add_argument("--store", action="store_true", help="also synth tasks and collect the expert store")
    args = ap.parse_args()
    if args.store:
        print(build_store(args.out, args.n))
    else:
        print(*build(args.out, args.n))
