"""`trajforge synth`: templates, bring-your-own SQLite, an LLM over loopback HTTP, and clear errors."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from typer.testing import CliRunner

from tests.scripted_chat import ScriptedChatServer, Status, unused_url
from trajforge.cli.main import app
from trajforge.envs.sqldb import ensure_db
from trajforge.tasks import read_tasks

SPORTS = "SELECT COUNT(*) FROM products WHERE category = 'Sports'"


def run(*args):
    return CliRunner().invoke(app, ["synth", *map(str, args)])


def sports_proposal(prompt="How many products are in the Sports category?"):
    with sqlite3.connect(ensure_db(0)) as conn:
        count = conn.execute(SPORTS).fetchone()[0]
    return json.dumps({"prompt": prompt, "plan": [
        {"name": "run_sql", "arguments": {"query": SPORTS}},
        {"name": "submit_answer", "arguments": {"answer": str(count)}}]})


def table_row(output: str, label: str) -> list[str]:
    """The cells of the summary table row whose first cell is ``label``."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if cells and cells[0] == label:
            return cells[1:]
    raise AssertionError(f"no row {label!r} in:\n{output}")


def test_templates_with_tier_filter(tmp_path):
    out = tmp_path / "t.jsonl"
    res = run("--env", "sql", "--n", 40, "--out", out, "--tier", "hard")
    assert res.exit_code == 0, res.output
    tasks = read_tasks(out)
    assert tasks and {t.tier for t in tasks} == {"hard"}
    # Columns: easy, medium, hard, ? (template drops carry no tier), total.
    assert table_row(res.output, "kept") == ["0", "0", str(len(tasks)), "0", str(len(tasks))]
    off = table_row(res.output, "off_tier")
    assert off[2:4] == ["0", "0"] and int(off[0]) > 0 and int(off[1]) > 0
    assert int(off[-1]) + len(tasks) == 40  # the generator made 40; the filter kept the hard ones
    assert "off_tier: tier" not in res.output  # counted, not listed one by one


def test_byo_questions(tmp_path):
    db = tmp_path / "pets.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE pets (name TEXT, kind TEXT, age INTEGER)")
        conn.executemany("INSERT INTO pets VALUES (?, ?, ?)",
                         [("Rex", "dog", 3), ("Tom", "cat", 5), ("Fido", "dog", 8)])
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps({"question": "How many dogs are there?",
                    "sql": "SELECT COUNT(*) FROM pets WHERE kind = 'dog'"}) + "\n"
        + json.dumps({"question": "Which pets are older than 4?",
                      "sql": "SELECT name FROM pets WHERE age > 4", "split": "test"}) + "\n"
        + json.dumps({"question": "Broken?", "sql": "SELECT FROM pets"}) + "\n")
    out = tmp_path / "pets.jsonl"
    res = run("--env", "sql", "--db", db, "--questions", questions, "--out", out)
    assert res.exit_code == 2 and '2 of 3 rows have no "split"' in " ".join(res.output.split())
    res = run("--env", "sql", "--db", db, "--questions", questions, "--out", out, "--split", "train")
    assert res.exit_code == 0, res.output
    tasks = read_tasks(out)
    assert [(t.expected, t.split) for t in tasks] == [(2, "train"), (["Tom", "Fido"], "test")]
    assert "q.jsonl:3: sql_error" in res.output
    assert table_row(res.output, "sql_error")[-1] == "1"


def test_llm_tasks_merged_into_a_template_pool(tmp_path):
    pool = tmp_path / "pool.jsonl"
    assert run("--env", "sql", "--n", 20, "--out", pool).exit_code == 0
    base = read_tasks(pool)
    script = [sports_proposal(), "not json", sports_proposal(base[0].prompt)]
    out = tmp_path / "merged.jsonl"
    rejected = tmp_path / "rejected.jsonl"
    with ScriptedChatServer(script) as srv:
        res = run("--env", "sql", "--llm", srv.url, "--llm-model", "m", "--n", 3,
                  "--max-requests", 3, "--pool", pool, "--out", out, "--rejected", rejected,
                  "--llm-concurrency", 1)
    assert res.exit_code == 0, res.output
    merged = read_tasks(out)
    assert merged[:20] == base and len(merged) == 21 and merged[20].template == "llm"
    assert table_row(res.output, "kept")[-1] == "1"
    # Columns easy, medium, hard, ?, total; request i aims at tier i (easy, medium, hard).
    assert table_row(res.output, "bad_json") == ["0", "1", "0", "0", "1"]
    assert table_row(res.output, "duplicate") == ["0", "0", "1", "0", "1"]
    assert table_row(res.output, "unfilled") == ["0", "0", "0", "2", "2"]
    lines = [json.loads(x) for x in rejected.read_text().splitlines()]
    assert [(r["source"], r["reason"]) for r in lines] == [("request 2", "bad_json"),
                                                           ("request 3", "duplicate")]


def test_llm_refusal_still_writes_verified_tasks(tmp_path):
    out = tmp_path / "t.jsonl"
    with ScriptedChatServer([sports_proposal(), Status(401, "bad key")]) as srv:
        res = run("--env", "sql", "--llm", srv.url, "--llm-model", "m", "--n", 5, "--out", out,
                  "--llm-concurrency", 1)
    flat = " ".join(res.output.split())
    assert res.exit_code == 1
    assert "HTTP 401" in flat and "the 1 tasks verified before that were written" in flat
    assert len(read_tasks(out)) == 1


def test_unreachable_llm(tmp_path):
    out = tmp_path / "t.jsonl"
    res = run("--env", "sql", "--llm", unused_url(), "--llm-model", "m", "--n", 2, "--out", out,
              "--llm-retries", 0)
    assert res.exit_code == 1 and "cannot reach" in " ".join(res.output.split())
    assert read_tasks(out) == []


@pytest.mark.parametrize("args, message", [
    (["--env", "nope"], "unknown environment 'nope'"),
    (["--db", "missing.sqlite", "--questions", "q.jsonl"], "missing.sqlite does not exist"),
    (["--questions", "q.jsonl", "--split", "dev"], "--questions needs --db FILE, or --db-dir DIR"),
    (["--questions", "q.jsonl", "--db-dir", "nodir"], "database folder nodir does not exist"),
    (["--questions", "q.jsonl", "--split", " dev"], "' dev' is not a split label"),
    (["--questions", "q.jsonl", "--dedup", "fuzzy"], "--dedup must be exact or near"),
    (["--questions", "q.jsonl", "--compare", "bag"], "--compare must be one of multiset, set"),
    (["--db-dir", "."], "--db-dir and --dedup are for --questions"),
    (["--llm", "http://127.0.0.1:9/v1"], "--llm needs --llm-model"),
    (["--tier", "extreme"], "'extreme' is not a tier"),
    (["--pool", "nothere.jsonl"], "nothere.jsonl does not exist"),
    (["--n", "-3"], "--n must be 0 or more, not -3"),
])
def test_clear_errors(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.jsonl").write_text('{"question": "How many?", "sql": "SELECT 1"}\n')
    res = run(*args, "--out", tmp_path / "x.jsonl")
    assert res.exit_code == 2
    assert message in " ".join(res.output.split())
    assert not (tmp_path / "x.jsonl").exists()


def test_tier_by_a_policys_solve_rate(tmp_path):
    out = tmp_path / "t.jsonl"
    res = run("--env", "sql", "--n", 12, "--out", out, "--tier-by", "expert", "--tier-samples", 1)
    assert res.exit_code == 0, res.output
    # The expert solves every task, so measured difficulty makes them all easy.
    assert {t.tier for t in read_tasks(out)} == {"easy"}
    assert table_row(res.output, "kept")[:3] == ["12", "0", "0"]


def test_llm_tasks_on_your_database_record_its_hash(tmp_path):
    db = tmp_path / "shop.sqlite"
    db.write_bytes(ensure_db(0).read_bytes())
    out = tmp_path / "t.jsonl"
    with ScriptedChatServer([sports_proposal()]) as srv:
        res = run("--env", "sql", "--db", db, "--llm", srv.url, "--llm-model", "m", "--n", 1,
                  "--max-requests", 1, "--out", out, "--llm-concurrency", 1)
    assert res.exit_code == 0, res.output
    [task] = read_tasks(out)
    assert task.db == str(db.resolve())
    assert task.db_sha256 == hashlib.sha256(db.read_bytes()).hexdigest()
