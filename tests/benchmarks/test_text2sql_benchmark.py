"""The text-to-SQL benchmark (benchmarks/text2sql): its counts and split guarantees, the structure
function, the template baseline where it must succeed and where it must fail, the BYO path, and
an eval store scored beside the baseline."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3

import pytest

from benchmarks.text2sql.baseline import TemplateBaseline, fill
from benchmarks.text2sql.build import read_questions, write_questions
from benchmarks.text2sql.families import FAMILIES
from benchmarks.text2sql.gazetteer import Gazetteer
from benchmarks.text2sql.questions import BenchmarkError, check, fill_sql, generate, slots
from benchmarks.text2sql.scoring import render, split_kinds, store_outcomes, table
from benchmarks.text2sql.structure import sql_structure
from benchmarks.text2sql.world import build_db


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("text2sql")
    db = build_db(out / "hospital.sqlite")
    return out, db, generate(db, db_name=db.name)


def test_counts_and_split_guarantees(built):
    _, db, items = built
    counts = check(items, db)
    assert counts.tables == 9 and counts.foreign_keys >= 8 and counts.rows > 5000
    assert counts.questions == len(items) >= 300
    assert set(counts.by_split) == {"train", "dev", "test"} and counts.by_split["test"] >= 150
    assert all(set(counts.by_tier[s]) == {"easy", "medium", "hard"} for s in ("train", "test"))
    # The guarantees again, computed here rather than trusted to check():
    splits_of: dict[str, set[str]] = {}
    for i in items:
        splits_of.setdefault(i.group, set()).add(i.split)
        assert i.structure == sql_structure(i.sql)
    assert all(len(s) == 1 for s in splits_of.values())
    sizes = {g: sum(1 for i in items if i.group == g) for g in splits_of}
    assert set(sizes.values()) <= {2, 3, 4}
    train_entities = {str(v) for i in items if i.split == "train" for k, v in i.entities.items() if k in _KINDS}
    test_entities = {str(v) for i in items if i.split == "test" for k, v in i.entities.items() if k in _KINDS}
    assert test_entities and not train_entities & test_entities
    train_structures = {i.structure for i in items if i.split == "train"}
    test = [i for i in items if i.split == "test"]
    unseen = [i for i in test if i.structure not in train_structures]
    assert len(unseen) == counts.test_unseen and len(unseen) / len(test) >= 0.30
    assert {i.family for i in unseen} == {f.name for f in FAMILIES if f.held == "test"}


_KINDS = {"city", "hospital", "specialty", "doctor", "patient", "diagnosis", "drug", "drug_class", "insurer"}


def test_the_build_is_deterministic(built, tmp_path):
    _, db, items = built
    again = build_db(tmp_path / "again.sqlite")
    dump = lambda p: hashlib.sha256("\n".join(sqlite3.connect(p).iterdump()).encode()).hexdigest()  # noqa: E731
    assert dump(again) == dump(db)
    assert [i.question for i in generate(again, db_name=db.name)] == [i.question for i in items]


def test_check_refuses_what_breaks_a_guarantee(built):
    _, db, items = built
    first_train = next(i for i in items if i.split == "train")
    crossing = [dataclasses.replace(i, split="test") if i is first_train else i for i in items]
    with pytest.raises(BenchmarkError, match="crosses splits"):
        check(crossing, db)
    # A test question naming a city a training question names.
    train_city = next(i.entities["city"] for i in items if i.split == "train" and "city" in i.entities)
    test_item = next(i for i in items if i.split == "test" and "city" in i.entities)
    leaked = [dataclasses.replace(i, question=i.question.replace(i.entities["city"], train_city) + " Thanks!")
              if i is test_item else i for i in items]
    with pytest.raises(BenchmarkError, match=train_city):
        check(leaked, db)
    held_out = {f.name for f in FAMILIES if f.held == "test"}
    with pytest.raises(BenchmarkError, match="structure unseen"):
        check([i for i in items if i.family not in held_out], db)


def test_every_phrasing_names_every_slot_and_families_are_reworded():
    for family in FAMILIES:
        assert 3 <= len(family.phrasings) <= 4, family.name
        for p in family.phrasings:
            assert set(slots(family)) <= {f for f in _fields(p)}, (family.name, p)
        # Hand-written: no two phrasings of a family share more than half their words.
        words = [set(p.lower().split()) for p in family.phrasings]
        assert all(len(a & b) / len(a | b) < 0.6 for n, a in enumerate(words) for b in words[n + 1:]), family.name


def _fields(text: str) -> set[str]:
    import string

    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def test_sql_structure_abstracts_literals_only():
    a = sql_structure("SELECT COUNT(*) FROM patients WHERE city = 'Tartu' AND birth_date < '1950-01-01'")
    assert a == "select count(*) from patients where city = ? and birth_date < ?"
    assert a == sql_structure("select count(*)\n  from PATIENTS where city='O''Brien' and birth_date<'2000-01-01';")
    assert sql_structure("SELECT x FROM t WHERE v IN ('a', 'b', 3) LIMIT 5") == "select x from t where v in(?) limit ?"
    assert sql_structure("SELECT a1.x FROM t1 a1 WHERE y > -2.5 -- 'note'") == "select a1.x from t1 a1 where y > ?"
    # A different shape is a different structure, whatever its values.
    assert sql_structure("SELECT COUNT(*) FROM patients WHERE city = 'Tartu' AND sex = 'F'") != a
    # Every family's groups share one structure; no two families share one.
    structures = {}
    for family in FAMILIES:
        binding = {s: 7 if s in family.numbers else "X" for s in slots(family)}
        structures.setdefault(sql_structure(fill_sql(family, binding)), []).append(family.name)
    assert all(len(names) == 1 for names in structures.values())


def test_baseline_refills_the_nearest_template(built):
    _, db, _ = built
    train = [("How many patients live in Aarhus?", "SELECT COUNT(*) FROM patients WHERE city = 'Aarhus'"),
             ("Which hospital is located in Basel?", "SELECT name FROM hospitals WHERE city = 'Basel'"),
             ("How many patients from Basel were born before 1970?",
              "SELECT COUNT(*) FROM patients WHERE city = 'Basel' AND birth_date < '1970-01-01'")]
    baseline = TemplateBaseline(db, train)
    try:
        guess = baseline.predict("Count the patients that live in Tartu.")
        assert guess.neighbour == train[0][0] and guess.sql == "SELECT COUNT(*) FROM patients WHERE city = 'Tartu'"
        assert baseline.correct(guess.sql, "SELECT COUNT(*) FROM patients WHERE city = 'Tartu'")
        dated = baseline.predict("How many patients from Dresden were born before 1950?")
        assert dated.sql == "SELECT COUNT(*) FROM patients WHERE city = 'Dresden' AND birth_date < '1950-01-01'"
        # An unseen structure: the nearest template answers another question, and is scored wrong.
        gold = "SELECT COUNT(*) FROM patients WHERE city = 'Tartu' AND sex = 'F' AND birth_date < '1960-01-01'"
        wrong = baseline.predict("How many women from Tartu were born before 1960?")
        assert wrong.neighbour == train[2][0] and not baseline.correct(wrong.sql, gold)
    finally:
        baseline.close()


def test_fill_maps_values_by_kind_and_rank(built):
    _, db, _ = built
    gaz = Gazetteer.of_database(sqlite3.connect(db))
    old = gaz.find("Which patients from Aarhus were admitted with pneumonia at age 60?")
    new = gaz.find("At age 45, which Tartu patients had COPD?")
    sql = "SELECT name FROM p WHERE city = 'Aarhus' AND dx = 'Pneumonia' AND age >= 60 LIMIT 1"
    filled = fill(sql, old, new)
    assert filled.complete and filled.sql == "SELECT name FROM p WHERE city = 'Tartu' AND dx = 'COPD' AND age >= 45 LIMIT 1"
    assert not fill(sql, old, gaz.find("Which patients from Tartu?")).complete


def test_byo_path_makes_a_task_of_every_row(built, tmp_path):
    from trajforge.envs.sql.byo import questions_to_tasks

    _, db, items = built
    sample = {}
    for i in items:  # one question per family (train, dev and test among them)
        sample.setdefault(i.family, i)
    qfile = write_questions(tmp_path / "questions.jsonl", list(sample.values()))
    (tmp_path / db.name).symlink_to(db)
    assert read_questions(qfile) == list(sample.values())
    report = questions_to_tasks(None, qfile)
    assert report.rejected == [] and len(report.tasks) == len(sample)
    assert {t.split for t in report.tasks} == {"train", "dev", "test"}


def test_an_eval_store_is_scored_beside_the_baseline(built, tmp_path):
    from trajforge.envs.sql.byo import questions_to_tasks
    from trajforge.eval.run import collect
    from trajforge.policies import make_policy
    from trajforge.tasks.pool import write_tasks

    _, db, items = built
    kinds = split_kinds(items)
    test = [i for i in items if i.split == "test"]
    picked = [next(i for i in test if kinds[i.question] == k) for k in ("seen", "unseen")]
    picked += [next(i for i in test if i.tier == "hard" and i not in picked)]
    qfile = write_questions(tmp_path / "questions.jsonl", picked)
    (tmp_path / db.name).symlink_to(db)
    tasks = questions_to_tasks(None, qfile).tasks
    write_tasks(tmp_path / "tasks.jsonl", tasks)
    collect(tasks[:2], make_policy("expert"), tmp_path / "store", show_progress=False)
    agents = store_outcomes(tmp_path / "store", tmp_path / "tasks.jsonl", items)
    assert agents == {"expert": {picked[0].question: 1.0, picked[1].question: 1.0}}
    baseline = {i.question: float(i is not picked[1]) for i in picked}  # a stand-in column
    t = table(items, {"template baseline": baseline, **agents})
    rows = dict(t.rows)
    assert [c.n for c in rows["all"]] == [2, 2] and [c.correct for c in rows["unseen structure"]] == [0.0, 1.0]
    assert t.missing == {"template baseline": len(test) - 3, "expert": len(test) - 2}
    assert "expert vs template baseline: exact McNemar p = 1.0000" in render(t)
    json.dumps(t.p_values)
