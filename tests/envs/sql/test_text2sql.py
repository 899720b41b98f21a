"""A public text-to-SQL set, in small (``tests/text2sql.py``): nothing lost on the way in.

Every row whose gold SQL runs becomes a task (the rest are listed with reasons), split labels are
kept, duplicates and cross-split leakage are reported and dropped only when asked, Spider's and
BIRD's layouts load with many databases in one pool, a changed database is refused by name, and
the expert solves every task at default settings — under execution accuracy too.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.text2sql import build, database
from trajforge.cli.main import app
from trajforge.envs import env_toolset
from trajforge.envs.sql.byo import questions_to_tasks
from trajforge.envs.sql.dbfile import DatabaseChanged, check_database, db_digest
from trajforge.harness import run_episodes
from trajforge.policies import make_policy
from trajforge.tasks import read_tasks
from trajforge.tasks.dedup import leakage


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return build(tmp_path_factory.mktemp("text2sql"))


def cli(*args):
    return CliRunner().invoke(app, [*map(str, args)])


def flat(output: str) -> str:
    return " ".join(output.split())


def solved(tasks) -> list[bool]:
    """Every task run by the expert in the real harness at default settings."""
    return [t.verdict.correct for t in run_episodes(tasks, make_policy("expert"))]


UNUSABLE = [("questions.jsonl:11", "bad_line"), ("questions.jsonl:21", "bad_line"),
            ("questions.jsonl:29", "sql_error"), ("questions.jsonl:30", "sql_error"),
            ("questions.jsonl:31", "sql_error")]


def test_every_row_whose_gold_sql_runs_becomes_a_task(root, tmp_path):
    out = tmp_path / "pool.jsonl"
    res = cli("synth", "--env", "sql", "--db", database(root, "concert_singer"),
              "--questions", root / "questions.jsonl", "--out", out)
    assert res.exit_code == 0, res.output
    tasks = read_tasks(out)
    assert len(tasks) == 31 - len(UNUSABLE)  # 31 lines: all but the unusable ones
    for source, reason in UNUSABLE:  # each listed with its reason
        assert f"{source}: {reason}" in res.output
    assert "no such table: fans" in flat(res.output)
    # Labels kept as given; nothing rejected for its split name.
    assert Counter(t.split for t in tasks) == {"train": 17, "test": 4, "dev": 4, "validation": 1}
    # Answers that are not one value are scored by execution (several columns, empty, NULL, ...).
    assert Counter(t.env for t in tasks) == {"sql": 13, "sql-exec": 13}
    by_prompt = {t.prompt: t for t in tasks}
    ordered = by_prompt["Show name, country, age for all singers ordered by age from the oldest to the youngest."]
    assert ordered.env == "sql-exec" and ordered.expected["ordered"] and len(ordered.expected["rows"]) == 7
    assert by_prompt["Which singers are older than 100?"].expected["rows"] == []
    assert by_prompt["What is the highest attendance of the stadium at Raith Rovers?"].expected["rows"] == [[None]]
    # Duplicates and leakage are reported, not dropped.
    text = flat(res.output)
    assert "same question: 1 group (2 rows); 1 crosses splits (dev/train 1)" in text
    assert ("same gold query: 4 groups (10 rows); 4 cross splits (dev/test 1, dev/train 3, test/train 1, "
            "train/validation 1)") in text
    assert "questions.jsonl:1 (train), questions.jsonl:4 (dev)" in text
    # Both toolsets travel with the pool, each task naming its own.
    assert {t.toolset_fingerprint for t in tasks} == {env_toolset("sql").fingerprint, env_toolset("sql-exec").fingerprint}
    assert {f.stem for f in (tmp_path / "toolsets").iterdir()} == {t.toolset_fingerprint for t in tasks}
    assert all(solved(tasks))


def test_the_expert_solves_every_row_under_execution_accuracy(root):
    report = questions_to_tasks(database(root, "concert_singer"), root / "questions.jsonl", env="sql-exec")
    assert len(report.tasks) == 26 and {t.env for t in report.tasks} == {"sql-exec"}
    assert [(r.source, r.reason) for r in report.rejected] == UNUSABLE
    assert all(solved(report.tasks))


def test_duplicates_are_dropped_only_when_asked_training_copies_first(root):
    db, questions = database(root, "concert_singer"), root / "questions.jsonl"
    kept = questions_to_tasks(db, questions)
    groups = [g for g in kept.duplicates if g.kind == "question"]
    assert [(g.sources, g.splits, g.leaks) for g in groups] == [
        (["questions.jsonl:1", "questions.jsonl:4"], ["train", "dev"], True)]
    assert leakage(kept.duplicates) == {"dev/test": 1, "dev/train": 4, "test/train": 1, "train/validation": 1}
    exact = questions_to_tasks(db, questions, dedup="exact")
    assert [(r.source, r.detail) for r in exact.rejected if r.reason == "duplicate"] == [
        ("questions.jsonl:1", "same question as questions.jsonl:4 (dev)")]  # the dev copy stays
    near = questions_to_tasks(db, questions, dedup="near")
    dropped = {r.source for r in near.rejected if r.reason == "duplicate"}
    assert dropped == {f"questions.jsonl:{n}" for n in (1, 2, 4, 5, 7, 12)}
    assert len(near.tasks) == 20 and near.dropped["duplicate"] == 6


def test_spider_layout_many_databases_in_one_pool(root, tmp_path):
    out = tmp_path / "dev.jsonl"
    args = ("synth", "--env", "sql", "--questions", root / "spider_dev.json", "--db-dir", root / "database",
            "--out", out)
    refused = cli(*args)  # Spider's dev.json has no split field: say which split it is
    assert refused.exit_code == 2 and '13 of 13 rows have no "split" field' in flat(refused.output)
    assert "--split dev" in flat(refused.output) and not out.exists()
    res = cli(*args, "--split", "dev")
    assert res.exit_code == 0, res.output
    tasks = read_tasks(out)
    assert len(tasks) == 11 and {t.split for t in tasks} == {"dev"}
    assert "spider_dev.json[11]: sql_error: no such table: loans" in flat(res.output)
    assert "spider_dev.json[12]: no_database" in flat(res.output) and "world_1.sqlite" in flat(res.output)
    dbs = {t.db: t.db_sha256 for t in tasks}
    assert dbs == {str(database(root, n).resolve()): db_digest(database(root, n)) for n in ("concert_singer", "library")}

    ev = cli("eval", "--tasks", out, "--policy", "expert", "--split", "dev")
    assert ev.exit_code == 0, ev.output
    assert f"evaluating split 'dev': 11 tasks from {out}" in flat(ev.output)
    row = next(line.split() for line in ev.output.splitlines() if line.split()[:2] == ["expert", "all"])
    assert row[2:4] == ["11", "100%"]


def test_bird_layout_with_evidence_compared_as_sets(root, tmp_path):
    out = tmp_path / "bird.jsonl"
    res = cli("synth", "--env", "sql-exec", "--questions", root / "bird_dev.json", "--db-dir", root / "database",
              "--split", "dev", "--compare", "set", "--out", out)
    assert res.exit_code == 0, res.output
    tasks = read_tasks(out)
    assert len(tasks) == 6 and all(t.expected["compare"] == "set" for t in tasks)
    first = next(t for t in tasks if t.prompt.startswith("Which Italian author"))
    assert first.prompt.endswith("Evidence: Italian author refers to country = 'Italy'; pages in total refers "
                                 "to SUM(pages)")
    assert all(solved(tasks))


def test_relative_database_paths_resolve_against_the_file(root, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # somewhere else entirely
    report = questions_to_tasks(None, root / "by_path.jsonl")
    assert [t.db for t in report.tasks] == [str(database(root, "library").resolve()),
                                            str(database(root, "concert_singer").resolve())]
    assert [t.expected for t in report.tasks] == [2, 3]


def test_a_changed_database_is_refused_by_name(tmp_path):
    root = build(tmp_path)
    out = tmp_path / "pool.jsonl"
    assert cli("synth", "--env", "sql", "--questions", root / "by_path.jsonl", "--out", out).exit_code == 0
    with sqlite3.connect(database(root, "library")) as conn:
        conn.execute("INSERT INTO author VALUES (9, 'Machado de Assis', 1839, 'Brazil')")
    res = cli("eval", "--tasks", out, "--policy", "expert", "--split", "train")
    assert res.exit_code == 2
    assert "database library.sqlite" in flat(res.output) and "has changed since its 1 task was made" in flat(res.output)
    task = next(t for t in read_tasks(out) if t.db.endswith("library.sqlite"))
    with pytest.raises(DatabaseChanged, match="library.sqlite"):
        check_database(task)


def test_a_json_array_saved_with_a_bom_is_read_as_one(root, tmp_path):
    """Windows editors start a file with a BOM: the array is still an array, not one bad line."""
    bommed = tmp_path / "dev.json"
    bommed.write_bytes(b"\xef\xbb\xbf" + (root / "spider_dev.json").read_bytes())
    plain = questions_to_tasks(None, root / "spider_dev.json", db_dir=root / "database", split="dev")
    report = questions_to_tasks(None, bommed, db_dir=root / "database", split="dev")
    assert [t.id for t in report.tasks] == [t.id for t in plain.tasks] and len(report.tasks) == 11
    assert [r.source for r in report.rejected] == ["dev.json[11]", "dev.json[12]"]


def test_one_question_on_two_databases_of_one_name_is_two_tasks(root, tmp_path):
    """A task's id names its database by file name: the same row on v1/ and v2/library.sqlite must
    still be two tasks, not one dropped as a repeat of the other's id."""
    for v in ("v1", "v2"):
        (tmp_path / v).mkdir()
        (tmp_path / v / "library.sqlite").write_bytes(database(root, "library").read_bytes())
    with sqlite3.connect(tmp_path / "v2" / "library.sqlite") as conn:
        conn.execute("INSERT INTO author VALUES (9, 'Machado de Assis', 1839, 'Brazil')")
    row = '{"question": "How many authors are from Brazil?", "sql": "SELECT count(*) FROM author ' \
          'WHERE country = \'Brazil\'", "db": "%s/library.sqlite"}\n'
    (tmp_path / "q.jsonl").write_text(row % "v1" + row % "v2")
    out = tmp_path / "pool.jsonl"
    res = cli("synth", "--env", "sql", "--questions", tmp_path / "q.jsonl", "--split", "train", "--out", out)
    assert res.exit_code == 0, res.output
    assert [(Path(t.db).parent.name, t.expected) for t in read_tasks(out)] == [("v1", 2), ("v2", 3)]
