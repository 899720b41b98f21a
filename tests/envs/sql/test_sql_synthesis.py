"""SqlEnv's synthesis hooks: the expected answer read off an executed plan, and the description."""

from __future__ import annotations

import pytest

from trajforge.envs import ToolError, make_env
from trajforge.schema import Task, ToolCall


@pytest.fixture
def env():
    env = make_env("sql")
    env.reset(Task(id="p", env="sql", prompt="", tier="easy", split="train", template="llm",
                   reference=(), expected=None))
    yield env
    env.close()


def run(env, *steps):
    for name, arg in steps:
        key = {"run_sql": "query", "submit_answer": "answer"}[name]
        assert env.execute(ToolCall(name=name, arguments={key: arg})).ok


def outcome_error(env) -> str:
    with pytest.raises(ToolError) as exc:
        env.expected_outcome()
    return exc.value.kind


def test_one_value_typed(env):
    run(env, ("run_sql", "SELECT COUNT(*), 'x' FROM products"), ("submit_answer", "64"))
    assert env.expected_outcome() == 64
    run(env, ("run_sql", "SELECT name, price FROM products WHERE id = 2"),
        ("submit_answer", "Yoga Mat"))
    assert env.expected_outcome() == "Yoga Mat"
    run(env, ("submit_answer", "137.99"))
    assert env.expected_outcome() == 137.99


def test_one_column_is_a_list(env):
    run(env, ("run_sql", "SELECT DISTINCT category FROM products"))
    cats = [r[0] for r in env.last_result.rows]
    run(env, ("submit_answer", ", ".join(reversed(cats))))
    assert env.expected_outcome() == cats
    run(env, ("submit_answer", cats[0]))
    assert outcome_error(env) == "verify_failed"


@pytest.mark.parametrize("steps, kind", [
    ([("run_sql", "SELECT 1")], "no_final_call"),
    ([("run_sql", "SELECT name FROM customers"), ("submit_answer", "x")], "truncated_result"),
    ([("run_sql", "SELECT MAX(price) FROM products WHERE 0"), ("submit_answer", "x")],
     "empty_result"),
    ([("run_sql", "SELECT id, name FROM products LIMIT 2"), ("submit_answer", "1")],
     "ambiguous_answer"),
    # Every category has the same number of products, so the "top" category is a tie.
    ([("run_sql", "SELECT category, COUNT(*) FROM products GROUP BY category ORDER BY 2 DESC "
                  "LIMIT 1"), ("submit_answer", "__top__")], "ambiguous_answer"),
])
def test_unusable_outcomes(env, steps, kind):
    for name, arg in steps:
        if arg == "__top__":
            arg = env.last_result.rows[0][0]
        run(env, (name, arg))
    assert outcome_error(env) == kind


def test_a_plan_that_never_queried_is_no_query(env):
    # The first submission is refused (SqlEnv.refuse_unsupported); the plan insists, still no query.
    assert env.execute(ToolCall(name="submit_answer", arguments={"answer": "3"})).error == "unsupported_answer"
    run(env, ("submit_answer", "3"))
    assert outcome_error(env) == "no_query"


def test_description_shows_tables_and_rows(env):
    text = env.describe_for_synthesis()
    assert "customers(id INTEGER" in text and "order_items(" in text
    assert "|Yoga Mat|" in text or "Trail Running Shoes" in text
    assert "last run_sql query" in text
