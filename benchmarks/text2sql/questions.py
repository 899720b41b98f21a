"""Questions with gold SQL, in paraphrase groups, split by group; and the checks the splits must pass.

    items = generate(db_path, seed=0)      # list[Item], every gold query run and kept only if usable
    counts = check(items, db_path)         # Counts; BenchmarkError when a guarantee fails

A family (``families.py``) bound to entity values is one logical query; its group gets 2-4 of the
family's hand-written phrasings. Groups go to splits whole. Each split draws entity values only
from its own share (``world.partition``), so no test question names an entity a training question
names; ``test``-held families exist only in test, so their structures never occur in train.

A binding is kept only if its gold result is usable as a question: non-empty, not all NULL, at
most ``MAX_ROWS`` rows, not 0 where the family says so, and no tie at a top-k cut.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import string
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.text2sql.families import FAMILIES, Family
from benchmarks.text2sql.gazetteer import NUMBER, Gazetteer
from benchmarks.text2sql.structure import sql_structure
from benchmarks.text2sql.world import ENTITY_COLUMNS, SPLITS, entity_values, hospital_cities, partition
from trajforge.envs.sql.tiering import sql_tier

PER_SPLIT = {"shared": {"train": 4, "dev": 1, "test": 2}, "test": {"test": 3}, "dev": {"dev": 2}}
"""Groups per family and split, by where the family is held."""
GROUP_SIZES = (2, 3, 3, 4)
"""How many phrasings a group gets, drawn from these (capped by the family's phrasings)."""
MAX_ROWS = 40
"""A gold result longer than this is a report, not a question."""
MIN_QUESTIONS, MIN_UNSEEN_SHARE, MIN_TABLES = 300, 0.30, 5
LOWER_KINDS = ("specialty", "diagnosis")
"""Entity kinds a question writes in lower case (acronyms such as COPD stay as they are)."""


class BenchmarkError(AssertionError):
    """A guarantee of the benchmark does not hold (counts, splits, entities, structures)."""


@dataclass(frozen=True)
class Item:
    """One question of the benchmark, as written to ``questions.jsonl`` (the BYO format's
    ``question``/``sql``/``split``/``db``, and what the benchmark reports by)."""

    question: str
    sql: str
    split: str
    db: str
    """The database file, relative to the questions file."""
    group: str
    """Paraphrase group: ``family/number`` — one logical query, one gold SQL, one split."""
    family: str
    structure: str
    """``sql_structure(sql)``."""
    tier: str
    """The project's structural tier of the gold SQL (``envs/sql/tiering.py``)."""
    entities: dict
    """Slot → value the group was bound with."""

    def row(self) -> dict:
        return asdict(self)


def slots(family: Family) -> list[str]:
    """The family's slot names, in the order they first appear in its SQL."""
    names = [f for _, f, _, _ in string.Formatter().parse(family.sql) if f]
    return list(dict.fromkeys(names))


def display(kind: str, value) -> str:
    """How a question writes a value: specialties and diagnoses in lower case, unless an acronym."""
    text = str(value)
    if kind in LOWER_KINDS and not text.split()[0].isupper():
        return text[0].lower() + text[1:]
    return text


def fill_sql(family: Family, binding: dict) -> str:
    return family.sql.format(**{k: str(v).replace("'", "''") for k, v in binding.items()})


def _usable(conn: sqlite3.Connection, family: Family, binding: dict) -> bool:
    rows = conn.execute(fill_sql(family, binding)).fetchmany(MAX_ROWS + 1)
    if not rows or len(rows) > MAX_ROWS or all(v is None for r in rows for v in r):
        return False
    if family.nonzero and rows[0][0] == 0:
        return False
    if family.rank:
        top = [r[0] for r in conn.execute(fill_sql(Family(family.name, family.held, family.rank, ()), binding))]
        if len(top) == 2 and top[0] == top[1]:
            return False
    return True


def _bindings(family: Family, pools: dict[str, list[str]], rng: random.Random) -> list[dict]:
    """Every binding of the family's slots from one split's entity pools, in a seeded order."""
    names = slots(family)
    choices = [family.numbers[n] if n in family.numbers else pools[n] for n in names]
    combos = [dict(zip(names, c)) for c in itertools.product(*choices)]
    combos = [c for c in combos if _ordered(c)]
    rng.shuffle(combos)
    return combos


def _ordered(binding: dict) -> bool:
    """A range's low end below its high end."""
    return not ("low" in binding and "high" in binding) or binding["low"] < binding["high"]


def _kind(slot: str) -> str | None:
    return slot if slot in ENTITY_COLUMNS else None


def generate(db: Path, seed: int = 0, db_name: str | None = None) -> list[Item]:
    """The benchmark's questions over the database at ``db`` (see the module docstring)."""
    rng = random.Random(f"questions-{seed}")
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        parts = partition(entity_values(conn), seed, strata={"city": hospital_cities(conn)})
        pools = {s: {k: sorted(v for v, sp in vals.items() if sp == s) for k, vals in parts.items()} for s in SPLITS}
        items: list[Item] = []
        for family in FAMILIES:
            number = 0
            for split, wanted in PER_SPLIT[family.held].items():
                kept = 0
                for binding in _bindings(family, pools[split], rng):
                    if kept == wanted:
                        break
                    if not _usable(conn, family, binding):
                        continue
                    kept += 1
                    items += _group(family, binding, split, f"{family.name}/{number}", db_name or db.name, rng)
                    number += 1
        return items
    finally:
        conn.close()


def _group(family: Family, binding: dict, split: str, group: str, db: str, rng: random.Random) -> list[Item]:
    sql = fill_sql(family, binding)
    shown = {k: display(_kind(k) or "", v) for k, v in binding.items()}
    k = min(rng.choice(GROUP_SIZES), len(family.phrasings))
    return [Item(question=p.format(**shown), sql=sql, split=split, db=db, group=group, family=family.name,
                 structure=sql_structure(sql), tier=sql_tier([sql]), entities=dict(binding))
            for p in rng.sample(family.phrasings, k)]


# ---- the guarantees ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Counts:
    """What the builder prints and the tests assert."""

    questions: int
    groups: int
    families: int
    by_split: dict
    """split → questions."""
    by_tier: dict
    """split → tier → questions."""
    test_unseen: int
    """Test questions whose structure occurs in no training question."""
    test_unseen_share: float
    tables: int
    foreign_keys: int
    rows: int
    """Rows in the whole database."""


def mentions(text: str, entities: Gazetteer) -> set[str]:
    """Entity values (of any kind) a question's text names, case-insensitively, as whole words."""
    return {str(m.value) for m in entities.find(text) if m.labels != NUMBER}


def check(items: list[Item], db: Path) -> Counts:
    """Counts of the benchmark; BenchmarkError naming the first guarantee that fails."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        fks = sum(len(conn.execute(f"PRAGMA foreign_key_list({t})").fetchall()) for t in tables)
        rows = sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables)
        entities = Gazetteer(entity_values(conn))
    finally:
        conn.close()
    _require(len(tables) >= MIN_TABLES and fks >= len(tables) - 2, f"{len(tables)} tables, {fks} foreign keys")
    _require(len(items) >= MIN_QUESTIONS, f"{len(items)} questions; the benchmark promises {MIN_QUESTIONS}")
    _require(len({i.question for i in items}) == len(items), "a question text repeats")
    groups: dict[str, list[Item]] = {}
    for i in items:
        groups.setdefault(i.group, []).append(i)
    for name, members in groups.items():
        _require(2 <= len(members) <= 4, f"group {name} has {len(members)} questions (2-4 wanted)")
        _require(len({m.split for m in members}) == 1, f"group {name} crosses splits")
        _require(len({m.sql for m in members}) == 1, f"group {name} has more than one gold SQL")
    gold_groups = Counter(members[0].sql for members in groups.values())
    _require(max(gold_groups.values()) == 1, "two groups share a gold query")
    train = [i for i in items if i.split == "train"]
    test = [i for i in items if i.split == "test"]
    seen_in_train = set().union(*(mentions(i.question, entities) for i in train))
    for i in test:
        leaked = mentions(i.question, entities) & seen_in_train
        _require(not leaked, f"test question {i.question!r} names {sorted(leaked)}, named in train too")
    train_literals = {str(v) for i in train for k, v in i.entities.items() if _kind(k)}
    test_literals = {str(v) for i in test for k, v in i.entities.items() if _kind(k)}
    _require(not train_literals & test_literals, f"entities in train and test: {sorted(train_literals & test_literals)}")
    train_structures = {i.structure for i in train}
    unseen = sum(i.structure not in train_structures for i in test)
    share = unseen / max(1, len(test))
    _require(share >= MIN_UNSEEN_SHARE, f"only {share:.0%} of test questions have a structure unseen in train")
    by_tier = {s: dict(sorted(Counter(i.tier for i in items if i.split == s).items())) for s in SPLITS}
    for s in ("train", "test"):
        _require(set(by_tier[s]) == {"easy", "medium", "hard"}, f"{s} lacks a tier: {by_tier[s]}")
    return Counts(questions=len(items), groups=len(groups), families=len({i.family for i in items}),
                  by_split=dict(Counter(i.split for i in items)), by_tier=by_tier, test_unseen=unseen,
                  test_unseen_share=round(share, 3), tables=len(tables), foreign_keys=fks, rows=rows)


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise BenchmarkError(what)


__all__ = ["BenchmarkError", "Counts", "Item", "check", "display", "fill_sql", "generate", "mentions", "slots"]
