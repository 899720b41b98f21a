"""SqlEnv: schema tools, result format, sandboxing, answer comparison and verification."""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time

import pytest

from trajforge.envs import make_env
from trajforge.envs.base import ToolError
from trajforge.envs.answers import answers_match
from trajforge.envs.sql.env import SqlEnv, _authorize
from trajforge.envs.sql.results import COUNT_LIMIT, format_cell, read_result, render_rows
from trajforge.envs.sqldb import CATEGORIES, CITIES, build_db, ensure_db
from trajforge.schema import Task, ToolCall


@pytest.fixture(scope="module", autouse=True)
def _cache_home(tmp_path_factory):
    # Keep generated databases out of the user's cache.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRAJFORGE_HOME", str(tmp_path_factory.mktemp("tfhome")))
        yield


def make_task(expected=7, seed=0) -> Task:
    return Task(id="t", env="sql", prompt="q", tier="easy", split="train", template="x",
                reference=(), expected=expected, seed=seed)


@pytest.fixture
def env():
    e = SqlEnv()
    e.reset(make_task())
    yield e
    e.close()


def sql(env: SqlEnv, query: str):
    return env.execute(ToolCall(name="run_sql", arguments={"query": query}))


def content_hash(path) -> str:
    conn = sqlite3.connect(path)
    h = hashlib.sha256()
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
        for row in conn.execute(f"SELECT * FROM {table} ORDER BY id"):
            h.update(repr(row).encode())
    conn.close()
    return h.hexdigest()


# ---- database ---------------------------------------------------------------------------------

def test_same_seed_same_content(tmp_path):
    build_db(tmp_path / "a.sqlite", seed=5)
    build_db(tmp_path / "b.sqlite", seed=5)
    build_db(tmp_path / "c.sqlite", seed=6)
    assert content_hash(tmp_path / "a.sqlite") == content_hash(tmp_path / "b.sqlite")
    assert content_hash(tmp_path / "a.sqlite") != content_hash(tmp_path / "c.sqlite")


def test_ensure_db_builds_once():
    path = ensure_db(0)
    mtime = path.stat().st_mtime_ns
    assert ensure_db(0) == path and path.stat().st_mtime_ns == mtime
    assert path.name == "retail-0.sqlite" and path.parent.name == "sql"
    assert not list(path.parent.glob("*.tmp"))


def test_every_city_and_category_is_populated():
    conn = sqlite3.connect(ensure_db(0))
    per_city = dict(conn.execute("SELECT city, COUNT(*) FROM customers GROUP BY city"))
    per_cat = dict(conn.execute("SELECT category, COUNT(*) FROM products GROUP BY category"))
    counts = [conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
              for t in ("customers", "products", "orders", "order_items")]
    bad_prices = conn.execute("SELECT COUNT(*) FROM products WHERE price != ROUND(price, 2)")
    assert bad_prices.fetchone()[0] == 0
    conn.close()
    assert set(per_city) == set(CITIES) and min(per_city.values()) >= 5
    assert set(per_cat) == set(CATEGORIES) and min(per_cat.values()) >= 5
    assert counts[0] == 120 and counts[2] == 300 and 500 < counts[3] < 900


# ---- tools ------------------------------------------------------------------------------------

def test_toolset_is_derived_from_methods():
    ts = SqlEnv.toolset()
    assert ts.names == ["list_tables", "describe_table", "run_sql", "submit_answer"]
    run_sql = ts.get("run_sql")
    assert run_sql.parameters["required"] == ["query"]
    assert run_sql.parameters["properties"]["query"]["description"]
    assert all(len(t.description) < 60 for t in ts.tools)  # short: it goes into a small prompt
    assert isinstance(make_env("sql"), SqlEnv)


def test_list_and_describe(env):
    assert env.list_tables() == "customers, products, orders, order_items"
    assert env.describe_table("orders") == (
        "orders(id INTEGER, customer_id INTEGER -> customers.id, order_date TEXT, "
        "status TEXT); 300 rows")
    assert env.describe_table(" Customers ").startswith("customers(id INTEGER, name TEXT, city")
    with pytest.raises(ToolError, match="customers, products, orders, order_items"):
        env.describe_table("users")
    assert env.milestones == ["explored_schema"]


def test_run_sql_output_format(env):
    out = env.run_sql("SELECT id, name, price FROM products WHERE id <= 2 ORDER BY id")
    lines = out.split("\n")
    assert lines[0] == "id|name|price" and lines[-1] == "(2 rows)" and len(lines) == 4
    rows = read_result(out)
    assert [r[0] for r in rows] == ["1", "2"] and re.fullmatch(r"\d+\.\d{1,2}", rows[0][2])
    assert env.run_sql("SELECT COUNT(*) AS n FROM customers") == "n\n120\n(1 row)"
    assert env.run_sql("SELECT name FROM customers WHERE 0") == "name\n(0 rows)"
    # Through the dispatch (the tool boundary) an empty result says why it may be empty.
    empty = sql(env, "SELECT name FROM customers WHERE 0").content
    assert empty.startswith("name\n(0 rows) — no row matched.") and read_result(empty) == []


def test_cells_escape_and_roundtrip():
    text, cells = render_rows(["a", "b"], [("x|y", "line1\nline2"), (None, b"\x00\x01"),
                                           (0.1 + 0.2, "back\\slash")], 50, 4000)
    assert text.split("\n")[1] == "x\\|y|line1\\nline2"
    assert read_result(text) == [["x|y", "line1\nline2"], ["NULL", "<blob 2 bytes>"],
                                 ["0.3", "back\\slash"]]
    assert format_cell("z" * 1000).endswith("...(+800 chars)")


def test_row_cap_marker(env):
    out = sql(env, "SELECT * FROM order_items").content
    assert re.search(r"^\.\.\. \(truncated: 50 of \d+ rows shown\)$", out.split("\n")[-1])
    assert len(out.split("\n")) == 52


def test_char_cap_marker():
    e = SqlEnv(max_chars=300)
    e.reset(make_task())
    out = e.run_sql("SELECT name, city, country, tier FROM customers")
    e.close()
    shown = int(re.search(r"truncated: (\d+) of 120 rows shown", out).group(1))
    assert 0 < shown < 50 and len(out) < 300 + 60


def test_count_stops_at_limit(env):
    out = env.run_sql("SELECT a.id FROM order_items a, order_items b")
    assert out.endswith(f"(truncated: 50 of {COUNT_LIMIT}+ rows shown)")


def test_sql_errors_are_tool_errors(env):
    r = sql(env, "SELECT nope FROM customers")
    assert not r.ok and r.error == "no_such_column" and "no such column: nope" in r.content
    r = sql(env, "SELECT 1; SELECT 2")
    assert not r.ok and r.error == "sql_error" and "one SQL statement" in r.content


# ---- sandbox ----------------------------------------------------------------------------------

@pytest.mark.parametrize("query", [
    "INSERT INTO customers VALUES (999, 'X', 'Lyon', 'France', 2020, 'gold')",
    "UPDATE products SET price = 0",
    "DELETE FROM orders",
    "DROP TABLE customers",
    "CREATE TABLE t (x)",
    "WITH a AS (SELECT 1) DELETE FROM orders",
    "ATTACH DATABASE ':memory:' AS other",
    "PRAGMA writable_schema=1",
    "PRAGMA journal_mode=WAL",
    "SELECT * FROM pragma_table_info('customers')",
    "VACUUM INTO '/tmp/trajforge-should-not-exist.sqlite'",
    "BEGIN",
    "SELECT load_extension('/tmp/evil.so')",
])
def test_writes_and_escapes_refused(env, query):
    before = content_hash(ensure_db(0))
    r = sql(env, query)
    assert not r.ok and r.error == "read_only" and not r.fault
    assert "only read-only SELECT queries are allowed" in r.content
    assert content_hash(ensure_db(0)) == before


def test_authorizer_denies_beyond_the_keyword_check():
    # The keyword check rejects non-SELECT text; the authorizer must hold on its own too.
    deny, ok = sqlite3.SQLITE_DENY, sqlite3.SQLITE_OK
    assert _authorize(sqlite3.SQLITE_ATTACH, "x.db", None, None, None) == deny
    assert _authorize(sqlite3.SQLITE_PRAGMA, "writable_schema", "1", None, None) == deny
    assert _authorize(sqlite3.SQLITE_INSERT, "customers", None, "main", None) == deny
    assert _authorize(sqlite3.SQLITE_FUNCTION, None, "load_extension", None, None) == deny
    assert _authorize(sqlite3.SQLITE_FUNCTION, None, "count", None, None) == ok
    assert _authorize(sqlite3.SQLITE_RECURSIVE, None, None, None, None) == ok


def test_runaway_query_hits_deadline(env):
    start = time.monotonic()
    r = sql(env, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
                 "SELECT count(*) FROM c")
    assert time.monotonic() - start < 3.0
    assert not r.ok and r.error == "query_limit"
    assert "query exceeded the 2.0 s time limit" in r.content
    assert sql(env, "SELECT 1").ok  # the connection is still usable afterwards


@pytest.mark.parametrize("query", ["SELECT zeroblob(100000000)", "SELECT randomblob(50000000)",
                                   "SELECT hex(randomblob(400000))"])
def test_huge_values_refused_or_cut(env, query):
    r = sql(env, query)
    assert len(r.content) < 1000
    assert not r.ok or "chars)" in r.content


def test_needs_reset_first():
    r = SqlEnv().execute(ToolCall(name="list_tables"))
    assert r.fault and r.error == "env_fault"


# ---- milestones and verification --------------------------------------------------------------

def test_episode_milestones_and_verdict(env):
    assert env.verify().submitted is False
    env.execute(ToolCall(name="list_tables"))
    sql(env, "SELECT COUNT(*) - 113 FROM customers")  # 120 - 113 = 7, the expected answer
    r = env.execute(ToolCall(name="submit_answer", arguments={"answer": "7"}))
    assert r.ok and r.content == "Answer submitted." and env.done
    v = env.verify()
    assert v.submitted and v.answer == "7" and v.correct
    assert v.milestones == ["explored_schema", "query_ok", "found_answer", "submitted"]


def test_found_answer_milestone():
    e = SqlEnv()
    e.reset(make_task(expected=120))
    e.run_sql("SELECT COUNT(*) FROM products")
    assert "found_answer" not in e.milestones
    e.run_sql("SELECT COUNT(*) FROM customers")
    assert e.milestones == ["query_ok", "found_answer"]
    e.reset(make_task(expected=["Lyon", "Cork"]))
    e.run_sql("SELECT DISTINCT city FROM customers")
    assert "found_answer" in e.milestones
    e.close()


def test_verify_rejects_wrong_answer(env):
    sql(env, "SELECT 8 FROM customers LIMIT 1")
    env.submit_answer("8")
    v = env.verify()
    assert v.submitted and not v.correct and "expected 7" in v.detail


def test_an_answer_no_query_supports_is_refused_once(env):
    """After only failed queries a submission is a guess: refused once (what the agent saw, never
    the expected answer, decides), the episode goes on, and a second submission is taken."""
    assert not sql(env, "SELECT city FROM products").ok
    first = env.execute(ToolCall(name="submit_answer", arguments={"answer": "7"}))  # the right value
    assert not first.ok and first.error == "unsupported_answer" and not first.fault
    assert "no query has succeeded" in first.content and "'7'" in first.content
    assert not env.done and env.verify().submitted is False and "submitted" not in env.milestones
    second = env.execute(ToolCall(name="submit_answer", arguments={"answer": "7"}))
    assert second.ok and env.done and env.verify().correct


def test_an_answer_after_a_query_is_never_refused(env):
    assert sql(env, "SELECT COUNT(*) FROM products WHERE stock < 0").ok  # an empty count still ran
    assert env.execute(ToolCall(name="submit_answer", arguments={"answer": "3"})).ok and env.done


def test_the_refusal_can_be_switched_off_and_is_restored_with_the_state():
    e = SqlEnv(refuse_unsupported=0)
    e.reset(make_task())
    assert e.execute(ToolCall(name="submit_answer", arguments={"answer": "7"})).ok
    e = SqlEnv()
    e.reset(make_task())
    before = e.snapshot()
    assert not e.execute(ToolCall(name="submit_answer", arguments={"answer": "7"})).ok
    after = e.snapshot()
    e.restore(before)  # a resumed episode before the refusal is refused again, after it is not
    assert not e.execute(ToolCall(name="submit_answer", arguments={"answer": "7"})).ok
    e.restore(after)
    assert e.execute(ToolCall(name="submit_answer", arguments={"answer": "7"})).ok
    e.close()


@pytest.mark.parametrize("submitted,expected,ok", [
    ("7", 7, True), ("7.0", 7, True), (" 7 ", 7, True), ("The answer is 7.", 7, True),
    ("$1,234.50", 1234.5, True), ("1234.5", 1234.504, True), ("1234.49", 1234.5, True),
    ("1234.35", 1234.5, False), ("100010", 100000, True), ("100020", 100000, False),
    (7, 7, True), ("8", 7, False), ("seven", 7, False), ("7 or 8", 7, False), ("", 7, False),
    ("-3", -3, True), ("0", 0, True),
    ("lyon", "Lyon", True), ("  Trail   Running Shoes ", "Trail Running Shoes", True),
    ('"Lyon".', "Lyon", True), ("Lyons", "Lyon", False),
    ("Ana Silva, Ben Novak", ["Ben Novak", "Ana Silva"], True),
    ("Ana Silva and Ben Novak", ["Ben Novak", "Ana Silva"], True),
    ("ana silva\nben novak", ["Ben Novak", "Ana Silva"], True),
    ('["Ben Novak", "Ana Silva"]', ["Ana Silva", "Ben Novak"], True),
    ("- Ana Silva\n- Ben Novak", ["Ana Silva", "Ben Novak"], True),
    ("Ana Silva", ["Ana Silva", "Ben Novak"], False),
    ("Ana Silva, Ben Novak, Zoe Blanc", ["Ana Silva", "Ben Novak"], False),
    (None, 7, False), ("7", None, False),
    # a number with its exponent, as Python and the SQL results write one (it read as two numbers)
    ("1e3", 1000, True), ("1.5e+16", 1.5e16, True), ("5e-05", 5e-05, True), ("2e3", 1000, False),
    # the minus sign U+2212 (and the fullwidth one): a negative, never its absolute value
    ("\u22127", 7, False), ("\u22127", -7, True), ("\uff0d7", -7, True),
])
def test_answers_match(submitted, expected, ok):
    assert answers_match(submitted, expected) is ok


def test_a_list_answer_with_a_long_run_of_spaces_is_graded_at_once():
    """The list separator's surrounding ``\\s*`` was retried at every space of a run: 20,000
    spaces took 40 s to grade, a model's megabyte of them would stall the collection."""
    start = time.monotonic()
    assert not answers_match("Ana Silva" + " " * 20_000 + "Ben Novak", ["Ana Silva", "Ben Novak"])
    assert answers_match("Ana Silva ,   Ben Novak " + " " * 20_000, ["Ana Silva", "Ben Novak"])
    assert time.monotonic() - start < 1.0


def test_a_result_shown_with_an_exponent_holds_the_answer():
    """Floats past 1e16 show as ``1.2e+18``: that result holds the answer (found_answer, so a right
    answer is not graded guessed) and submitting it as shown is right."""
    e = SqlEnv()
    e.reset(make_task(expected=1.2e18))
    assert "1.2e+18" in e.run_sql("SELECT COUNT(*) * 10000000000000000.0 FROM customers")
    assert "found_answer" in e.milestones
    e.submit_answer("1.2e+18")
    assert e.verify().correct
    e.close()
