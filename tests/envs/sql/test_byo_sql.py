"""Bring-your-own SQLite + questions: gold SQL executed, result as answer (or scored by execution),
bad lines reported, splits kept, duplicates reported."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time

import pytest

from trajforge.envs import make_env
from trajforge.harness import run_episodes
from trajforge.policies import make_policy
from trajforge.schema import Task
from trajforge.tasks import read_tasks, write_tasks
from trajforge.envs.sql.byo import answer_text, questions_to_tasks, tables_read
from trajforge.envs.sql.questions import QuestionsError

AUTHORS = [(1, "Ana Lima", "Chile"), (2, "Bo Berg", "Sweden"), (3, "Cy Moss", "Chile"),
           (4, "Di Park", "Korea")]


def make_db(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT, country TEXT)")
    conn.execute("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT, "
                 "author_id INTEGER REFERENCES authors(id), year INTEGER, pages INTEGER)")
    conn.execute('CREATE TABLE "book reviews" (book_id INTEGER, stars REAL)')
    conn.executemany("INSERT INTO authors VALUES (?, ?, ?)", AUTHORS)
    # 60 books: author 2 wrote 30, the others 10 each; pages 100..690.
    books = [(i, f"Book {i}", 2 if i % 2 else (1, 3, 4)[(i // 2) % 3], 1990 + i % 30, 100 + 10 * i)
             for i in range(60)]
    conn.executemany("INSERT INTO books VALUES (?, ?, ?, ?, ?)", books)
    conn.executemany('INSERT INTO "book reviews" VALUES (?, ?)', [(1, 4.0), (2, 5.0), (3, 3.5)])
    conn.commit()
    conn.close()
    return path


LINES = [
    {"question": "How many books are there?", "sql": "SELECT COUNT(*) FROM books"},      # 1
    {"question": "Which authors are from Chile?",                                       # 2
     "sql": "SELECT name FROM authors WHERE country = 'Chile'", "split": "test"},
    {"question": "Which author wrote the most books?",                                  # 3
     "sql": "SELECT a.name FROM authors a JOIN books b ON b.author_id = a.id "
            "GROUP BY a.id ORDER BY COUNT(*) DESC LIMIT 1", "split": "heldout"},
    {"question": "How many books are longer than the average book?",                    # 4
     "sql": "SELECT COUNT(*) FROM books WHERE pages > (SELECT AVG(pages) FROM books)"},
    {"question": "What is the average star rating?",                                    # 5
     "sql": 'SELECT AVG(stars) FROM "book reviews"'},
    {"question": "What is the nope of the books?", "sql": "SELECT nope FROM books"},    # 6
    {"question": "Which books come from the future?",                                   # 7
     "sql": "SELECT title FROM books WHERE year > 3000"},
    {"question": "List titles and years.", "sql": "SELECT title, year FROM books WHERE id < 3"},  # 8
    {"question": "Delete every book.", "sql": "DELETE FROM books"},                     # 9
    "{oops",                                                                            # 10
    {"question": "Where is the SQL?"},                                                  # 11
    {"question": "how many books are there", "sql": "SELECT COUNT(*) FROM books"},      # 12
    {"question": "A dev split?", "sql": "SELECT 1", "split": "dev"},                    # 13
    {"question": "What are all the book titles?", "sql": "SELECT title FROM books"},    # 14
]


@pytest.fixture
def files(tmp_path):
    db = make_db(tmp_path / "library.sqlite")
    questions = tmp_path / "questions.jsonl"
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in LINES)
    questions.write_text(text + "\n\n")  # a trailing blank line is no question
    return db, questions


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_questions_become_verified_tasks_the_expert_solves(files, tmp_path):
    db, questions = files
    before = digest(db)
    report = questions_to_tasks(db, questions, split="train")
    # Every row whose gold SQL runs is a task: only unreadable rows and failing SQL are rejected.
    assert [(r.source, r.reason) for r in report.rejected] == [
        ("questions.jsonl:6", "sql_error"), ("questions.jsonl:9", "sql_error"),
        ("questions.jsonl:10", "bad_line"), ("questions.jsonl:11", "bad_line")]
    details = {r.source.split(":")[1]: r.detail for r in report.rejected}
    assert "no such column: nope" in details["6"] and "read-only" in details["9"]
    assert "sql" in details["11"]
    assert report.dropped == {"sql_error": 2, "bad_line": 2}

    by_q = {(t.prompt, t.split): t for t in report.tasks}
    assert len(report.tasks) == 10 and len(by_q) == 10  # line 12 repeats line 1 (reported below)
    tasks = {q: t for (q, _), t in by_q.items()}
    with sqlite3.connect(db) as conn:  # the expected answers are the gold results, typed
        assert tasks["How many books are there?"].expected == 60
        assert sorted(tasks["Which authors are from Chile?"].expected) == ["Ana Lima", "Cy Moss"]
        assert tasks["Which author wrote the most books?"].expected == "Bo Berg"
        avg = conn.execute('SELECT AVG(stars) FROM "book reviews"').fetchone()[0]
        assert tasks["What is the average star rating?"].expected == pytest.approx(avg)
    # What is not one value is scored by execution: several columns, an empty result, 60 rows.
    scored = {q for q, t in tasks.items() if t.env == "sql-exec"}
    assert scored == {"Which books come from the future?", "List titles and years.",
                      "What are all the book titles?"}
    assert tasks["List titles and years."].expected["rows"] == [["Book 0", 1990], ["Book 1", 1991],
                                                                 ["Book 2", 1992]]
    assert len(tasks["What are all the book titles?"].expected["rows"]) == 60
    assert tasks["Which books come from the future?"].expected["rows"] == []
    assert tasks["What is the average star rating?"].tier == "easy"
    assert tasks["Which author wrote the most books?"].tier == "medium"
    assert tasks["How many books are longer than the average book?"].tier == "hard"
    assert tasks["Which authors are from Chile?"].split == "test"
    assert tasks["Which author wrote the most books?"].split == "heldout"
    assert tasks["A dev split?"].split == "dev"  # any label is kept as given
    # The plan inspects the schema and the tables the query reads, then queries and submits.
    review = tasks["What is the average star rating?"].reference
    assert [(c.name, c.arguments.get("table")) for c in review[:2]] == [
        ("list_tables", None), ("describe_table", "book reviews")]
    assert all(t.db == str(db.resolve()) and t.db_sha256 == before and t.template == "byo"
               for t in report.tasks)
    # The repeated question is reported (same question, same gold query), not dropped.
    assert [(g.kind, g.sources) for g in report.duplicates] == [
        ("question", ["questions.jsonl:1", "questions.jsonl:12"]),
        ("gold_query", ["questions.jsonl:1", "questions.jsonl:12"])]

    # Through the pool file and the real harness: the expert solves every task.
    pool = read_tasks(write_tasks(tmp_path / "tasks.jsonl", report.tasks))
    trajs = run_episodes(pool, make_policy("expert"))
    assert [t.verdict.correct for t in trajs] == [True] * 10
    assert digest(db) == before  # opened read-only throughout


def test_a_file_without_splits_is_refused_until_one_is_named(files):
    db, questions = files
    with pytest.raises(QuestionsError, match=r'9 of 12 rows have no "split".*--split NAME'):
        questions_to_tasks(db, questions)
    report = questions_to_tasks(db, questions, split="validation")
    splits = {t.prompt: t.split for t in report.tasks}
    assert splits["How many books are there?"] == "validation"  # rows without one take the file's
    assert splits["Which authors are from Chile?"] == "test"     # a row's own split wins


def test_missing_files_are_named(files, tmp_path):
    db, questions = files
    with pytest.raises(FileNotFoundError, match="nowhere.sqlite"):
        questions_to_tasks(tmp_path / "nowhere.sqlite", questions, split="train")
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl"):
        questions_to_tasks(db, tmp_path / "nowhere.jsonl", split="train")
    task = Task(id="t", env="sql", prompt="?", tier="easy", split="train", template="byo",
                reference=(), expected=1, db=str(tmp_path / "gone.sqlite"))
    with pytest.raises(FileNotFoundError, match="gone.sqlite"):
        make_env("sql").reset(task)


def test_answer_text_keeps_items_with_separators_whole():
    assert answer_text([["7"]]) == "7"
    assert answer_text([["Ana"], ["Bo"]]) == "Ana, Bo"
    assert json.loads(answer_text([["Salt, coarse"], ["Rock and Roll"]])) == [
        "Salt, coarse", "Rock and Roll"]


def test_tables_read():
    tables = ["authors", "books", "book reviews"]
    assert tables_read('SELECT * FROM "book reviews" r JOIN books b ON 1 WHERE x = \'authors\'',
                       tables) == ["book reviews", "books"]


def test_hostile_question_files_are_read_safely_and_within_budget(files, tmp_path):
    db, _ = files
    questions = tmp_path / "hostile.jsonl"
    rows = [b'{"question": ' + b"[" * 100_000 + b"]" * 100_000 + b', "sql": "SELECT 1"}',  # nested too deep
            b"\xff\xfe not utf-8",
            json.dumps([1, 2]).encode(),                                                   # not an object
            json.dumps({"question": "q", "sql": "SELECT 1", "split": "a\u0000b"}).encode(),  # bad label
            json.dumps({"question": "Forever?", "sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
                        "SELECT x + 1 FROM c) SELECT count(*) FROM c"}).encode(),          # never ends
            json.dumps({"question": "Fine?", "sql": "SELECT 1", "split": "dev"}).encode()]
    questions.write_bytes(b"\n".join(rows) + b"\n")
    start = time.perf_counter()
    report = questions_to_tasks(db, questions, split="train")
    assert time.perf_counter() - start < 15
    assert [(r.source, r.reason) for r in report.rejected] == [
        ("hostile.jsonl:1", "bad_line"), ("hostile.jsonl:2", "bad_line"), ("hostile.jsonl:3", "bad_line"),
        ("hostile.jsonl:4", "bad_line"), ("hostile.jsonl:5", "sql_error")]
    assert "time limit" in report.rejected[-1].detail and "split" in report.rejected[3].detail
    assert [t.prompt for t in report.tasks] == ["Fine?"]
    # A file that starts like a JSON array but is not one is refused as a whole, by name.
    broken = tmp_path / "broken.json"
    broken.write_text('[{"question": "a", "sql": "SELECT 1"}, ')
    with pytest.raises(QuestionsError, match="broken.json starts like a JSON array but is not JSON"):
        questions_to_tasks(db, broken, split="dev")
