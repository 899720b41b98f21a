"""Bring-your-own SQLite + questions: gold SQL executed, result as answer, bad lines reported."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest

from trajforge.envs import make_env
from trajforge.harness import run_episodes
from trajforge.policies import make_policy
from trajforge.schema import Task
from trajforge.tasks import read_tasks, write_tasks
from trajforge.envs.sql.byo import answer_text, questions_to_tasks, tables_read

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
    report = questions_to_tasks(db, questions)
    assert [(r.source, r.reason) for r in report.rejected] == [
        ("questions.jsonl:6", "sql_error"), ("questions.jsonl:7", "empty_result"),
        ("questions.jsonl:8", "multi_column"), ("questions.jsonl:9", "sql_error"),
        ("questions.jsonl:10", "bad_line"), ("questions.jsonl:11", "bad_line"),
        ("questions.jsonl:12", "duplicate"), ("questions.jsonl:13", "bad_line"),
        ("questions.jsonl:14", "too_many_rows")]
    details = {r.source.split(":")[1]: r.detail for r in report.rejected}
    assert "no such column: nope" in details["6"] and "read-only" in details["9"]
    assert "sql" in details["11"] and "split" in details["13"] and "line 1" in details["12"]
    assert report.dropped == {"sql_error": 2, "empty_result": 1, "multi_column": 1, "bad_line": 3,
                              "duplicate": 1, "too_many_rows": 1}

    by_q = {t.prompt: t for t in report.tasks}
    assert len(by_q) == 5
    with sqlite3.connect(db) as conn:  # the expected answers are the gold results, typed
        assert by_q["How many books are there?"].expected == 60
        assert sorted(by_q["Which authors are from Chile?"].expected) == ["Ana Lima", "Cy Moss"]
        assert by_q["Which author wrote the most books?"].expected == "Bo Berg"
        avg = conn.execute('SELECT AVG(stars) FROM "book reviews"').fetchone()[0]
        assert by_q["What is the average star rating?"].expected == pytest.approx(avg)
    assert {q: t.tier for q, t in by_q.items()} == {
        "How many books are there?": "easy", "Which authors are from Chile?": "easy",
        "Which author wrote the most books?": "medium",
        "How many books are longer than the average book?": "hard",
        "What is the average star rating?": "easy"}
    assert {q: t.split for q, t in by_q.items()}["Which authors are from Chile?"] == "test"
    assert by_q["Which author wrote the most books?"].split == "heldout"
    # The plan inspects the schema and the tables the query reads, then queries and submits.
    review = by_q["What is the average star rating?"].reference
    assert [(c.name, c.arguments.get("table")) for c in review[:2]] == [
        ("list_tables", None), ("describe_table", "book reviews")]
    assert all(t.db == str(db.resolve()) and t.template == "byo" for t in report.tasks)

    # Through the pool file and the real harness: the expert solves every task.
    pool = read_tasks(write_tasks(tmp_path / "tasks.jsonl", report.tasks))
    trajs = run_episodes(pool, make_policy("expert"))
    assert [t.verdict.correct for t in trajs] == [True] * 5
    assert digest(db) == before  # opened read-only throughout


def test_missing_files_are_named(files, tmp_path):
    db, questions = files
    with pytest.raises(FileNotFoundError, match="nowhere.sqlite"):
        questions_to_tasks(tmp_path / "nowhere.sqlite", questions)
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl"):
        questions_to_tasks(db, tmp_path / "nowhere.jsonl")
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
