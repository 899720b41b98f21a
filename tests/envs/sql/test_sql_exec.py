"""The ``sql-exec`` environment: paging, counting, submit_query through the SQL worker, execution-accuracy
verdicts, its own toolset, and the built-in templates in this mode."""

from __future__ import annotations

import sqlite3

import pytest

from trajforge.envs import env_toolset, make_env
from trajforge.envs.sql.execution import SqlExecEnv
from trajforge.envs.sqlguard import GuardedDb
from trajforge.harness import run_episodes
from trajforge.policies import make_policy
from trajforge.schema import Task, ToolCall
from trajforge.tasks import synthesize
from trajforge.tasks.verify import verified

QUERY = "SELECT id, name, score FROM people ORDER BY id"


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "people.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, score REAL, pic BLOB)")
        conn.executemany("INSERT INTO people VALUES (?, ?, ?, ?)",
                         [(i, f"p{i}", i / 4, bytes([i % 256])) for i in range(1, 131)])
    return path


def probe(db, expected=None) -> Task:
    return Task(id="x", env="sql-exec", prompt="List everyone.", tier="easy", split="dev", template="byo",
                reference=(), expected=expected, db=str(db))


def call(name, **arguments):
    return ToolCall(name=name, arguments=arguments)


def test_the_toolset_differs_from_sql_and_so_does_its_fingerprint():
    sql, exec_ = env_toolset("sql"), env_toolset("sql-exec")
    assert exec_.names == ["list_tables", "describe_table", "run_sql", "submit_query"]
    assert "submit_answer" in sql.names and sql.fingerprint != exec_.fingerprint
    run_sql = next(t for t in exec_.tools if t.name == "run_sql")
    assert set(run_sql.parameters["properties"]) == {"query", "offset"}  # the sql toolset is unchanged
    assert set(next(t for t in sql.tools if t.name == "run_sql").parameters["properties"]) == {"query"}


def test_long_results_are_paged_and_counted(db):
    env = SqlExecEnv()
    env.reset(probe(db))
    first = env.execute(call("run_sql", query=QUERY)).content
    assert first.splitlines()[1] == "1|p1|0.25" and first.endswith("(truncated: 50 of 130 rows shown)")
    page = env.execute(call("run_sql", query=QUERY, offset=50)).content.splitlines()
    assert page[1].startswith("51|p51|") and page[-1] == "... (rows 51-100 of 130 shown)"
    last = env.execute(call("run_sql", query=QUERY, offset=120)).content
    assert last.endswith("... (rows 121-130 of 130 shown)")
    assert "no rows past row 500" in env.execute(call("run_sql", query=QUERY, offset=500)).content
    assert env.execute(call("run_sql", query=QUERY, offset=-1)).error == "invalid_args"
    env.close()


def test_a_submitted_query_runs_in_full_and_is_compared_with_the_gold_result(db):
    gold = [call("run_sql", query=QUERY), call("submit_query", query=QUERY)]
    task, run = verified(probe(db), gold)
    assert len(task.expected["rows"]) == 130 and task.expected["ordered"]
    assert task.expected["columns"] == ["id", "name", "score"] and task.expected["compare"] == "multiset"
    assert run.results[-1] == "Query submitted (130 rows, 3 columns)."

    env = SqlExecEnv()
    env.reset(task)
    # A failing submission is an error the agent sees; the episode goes on.
    bad = env.execute(call("submit_query", query="SELECT nope FROM people"))
    assert not bad.ok and bad.error == "sql_error" and not env.done
    assert env.execute(call("submit_query", query="DELETE FROM people")).error == "sql_error"
    # Columns permuted and ORDER BY kept: still the gold result.
    assert env.execute(call("submit_query", query="SELECT score, id, name FROM people ORDER BY id")).ok
    verdict = env.verify()
    assert env.done and verdict.correct and verdict.answer.startswith("SELECT score")
    env.close()

    for wrong, why in [("SELECT id, name, score FROM people ORDER BY id DESC", "not in the order"),
                       ("SELECT id, name FROM people ORDER BY id", "2 columns"),
                       ("SELECT id, name, score FROM people WHERE id < 100 ORDER BY id", "99 rows")]:
        env = SqlExecEnv()
        env.reset(task)
        env.execute(call("submit_query", query=wrong))
        verdict = env.verify()
        assert verdict.submitted and not verdict.correct and why in verdict.detail
        env.close()


def test_results_past_the_cap_are_refused_as_gold_and_never_correct(db, monkeypatch):
    monkeypatch.setattr(SqlExecEnv, "max_result_rows", 100)
    with pytest.raises(Exception, match="more than 100 rows"):
        verified(probe(db), [call("submit_query", query=QUERY)])
    task, _ = verified(probe(db), [call("submit_query", query="SELECT id FROM people WHERE id <= 100")])
    env = SqlExecEnv()
    env.reset(task)
    assert env.execute(call("submit_query", query="SELECT id FROM people")).content == \
        "Query submitted (100+ rows, 1 columns)."
    assert "cut at the cap" in env.verify().detail
    env.close()


def test_compare_set_comes_from_the_task_and_ignores_duplicates(db):
    task, _ = verified(probe(db, {"compare": "set"}), [call("submit_query", query="SELECT DISTINCT score > 10 FROM people")])
    assert task.expected["compare"] == "set" and len(task.expected["rows"]) == 2
    env = SqlExecEnv()
    env.reset(task)
    env.execute(call("submit_query", query="SELECT score > 10 FROM people"))  # 130 rows, 2 distinct
    assert env.verify().correct
    env.close()


def test_the_worker_returns_typed_values_under_its_byte_cap(db):
    guarded = GuardedDb(db)
    try:
        result = guarded.rows("SELECT id, name, score, pic, NULL FROM people WHERE id <= 2", 2.0, 10)
        assert result.complete and result.columns == ["id", "name", "score", "pic", "NULL"]
        assert result.rows == [(1, "p1", 0.25, b"\x01", None), (2, "p2", 0.5, b"\x02", None)]
        cut = guarded.rows("SELECT name FROM people", 2.0, 1000, max_bytes=100)
        assert not cut.complete and 0 < len(cut.rows) < 130
        with pytest.raises(sqlite3.OperationalError, match="not authorized"):
            guarded.rows("SELECT * FROM sqlite_master WHERE 0 UNION SELECT 1,2,3,4,5 FROM pragma_table_info('x')",
                         2.0, 10)
    finally:
        guarded.close()


def test_snapshot_restore_undoes_a_submission(db):
    env = SqlExecEnv()
    task, _ = verified(probe(db), [call("submit_query", query="SELECT count(*) FROM people")])
    env.reset(task)
    snap = env.snapshot()
    env.execute(call("submit_query", query="SELECT count(*) FROM people"))
    assert env.verify().correct
    env.restore(snap)
    assert not env.verify().submitted and not env.done
    env.close()


def test_builtin_templates_in_execution_mode_are_solved_by_the_expert(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJFORGE_HOME", str(tmp_path))
    report = synthesize("sql-exec", 20, seed=1)
    assert len(report.tasks) == 20 and {t.env for t in report.tasks} == {"sql-exec"}
    assert {t.split for t in report.tasks} == {"train", "test", "heldout"}
    assert not any("Answer with" in t.prompt for t in report.tasks)
    assert all(t.reference[-1].name == "submit_query" and t.reasoning[-1].startswith("That query")
               for t in report.tasks)
    trajs = run_episodes(report.tasks, make_policy("expert"))
    assert all(t.verdict.correct for t in trajs), [t.verdict.detail for t in trajs if not t.verdict.correct]
    assert make_env("sql-exec").final_tool == "submit_query"


def test_a_process_with_many_open_descriptors_still_talks_to_its_workers(db):
    # Hundreds of episodes at once each hold a worker's pipes: waiting on one numbered past 1024
    # must work (select() cannot).
    import os
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1300:
        pytest.skip(f"needs 1300 open files, the limit is {soft}")
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        guarded = GuardedDb(db)
        try:
            assert guarded.rows("SELECT count(*) FROM people", 2.0, 10).rows == [(130,)]
        finally:
            guarded.close()
    finally:
        for fd in held:
            os.close(fd)
