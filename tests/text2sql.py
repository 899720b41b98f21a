"""The text-to-SQL fixture (``tests/fixtures/text2sql``) laid out as a public set ships: SQLite files
under ``database/<db_id>/<db_id>.sqlite`` (built from the ``.sql`` scripts, so the diff stays
readable) and the question files beside them.

* ``questions.jsonl``: rows on ``concert_singer`` with ``train``/``dev``/``test``/``validation``
  splits, paraphrase groups, exact duplicates across splits, shared gold queries, multi-row and
  multi-column answers, an empty and a NULL result, a top-1 that ties, three gold queries that do
  not run and two unreadable lines;
* ``spider_dev.json``: Spider's layout (``query``, ``db_id``, the parsed ``sql`` object, no split)
  over two databases, with a query that fails and a ``db_id`` that has no database;
* ``bird_dev.json``: BIRD's layout (``SQL``, ``evidence``, ``difficulty``);
* ``by_path.jsonl``: rows naming their database by a path relative to the file.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "text2sql"
DATABASES = ("concert_singer", "library")
FILES = ("questions.jsonl", "spider_dev.json", "bird_dev.json", "by_path.jsonl")


def build(root: Path) -> Path:
    """Lay the fixture out under ``root``; returns ``root``."""
    for name in DATABASES:
        path = database(root, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path)
        try:
            conn.executescript((FIXTURE / f"{name}.sql").read_text())
            conn.commit()
        finally:
            conn.close()
    for name in FILES:
        shutil.copy(FIXTURE / name, root / name)
    return root


def database(root: Path, name: str) -> Path:
    return root / "database" / name / f"{name}.sqlite"
