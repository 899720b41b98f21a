"""The ``sql`` environment: answer questions about a retail SQLite database by querying it.

``env`` (SqlEnv: list_tables, describe_table, run_sql, submit_answer; read-only, deadlines,
caps), ``execution`` (SqlExecEnv, the ``sql-exec`` environment: submit_query, scored by execution
accuracy with ``compare``), ``dbfile`` (a database file's content hash), ``tasks`` (question templates with executed reference SQL), ``worlds`` (the database with other
names, tables, columns and rows, for training across worlds), ``byo`` (tasks from your own
SQLite file and questions), ``tiering`` (tiers from query structure). The database is
``trajforge.envs.sqldb`` (seeded, generated on first use).
"""

from trajforge._compat import ENV_MODULE_NAMES, moved_names
from trajforge.envs.registry import EnvSpec
from trajforge.envs.sql.mistakes import sql_mistakes
from trajforge.envs.sql.rephrasings import rephrase
from trajforge.envs.sql.failures import answer_grounded, wrong_answer_kind
from trajforge.envs.sql.env import SqlEnv
from trajforge.envs.sql.execution import SqlExecEnv
from trajforge.envs.sql.tasks import (exec_generator, generate_compose_tasks, generate_sql_exec_tasks, generate_sql_tasks,
                                      generator, reasoning_for)
from trajforge.envs.sql.tiering import plan_tier

SPEC = EnvSpec(name="sql", env=SqlEnv, generate=generate_sql_tasks, world_generator=lambda w: generator(0, w),
               compose=generate_compose_tasks,
               tier=plan_tier, reasoning=reasoning_for,
               summary="questions about a seeded retail SQLite database (or your own file)",
               wrong_answer=wrong_answer_kind, grounded=answer_grounded,
               # Close: a result held the answer. Any query that ran reaches query_ok and any
               # guess reaches submitted, so those say nothing.
               progress=frozenset({"found_answer"}),
               mistakes=sql_mistakes, rephrase=rephrase)
EXEC_SPEC = EnvSpec(name="sql-exec", env=SqlExecEnv, generate=generate_sql_exec_tasks,
                    world_generator=lambda w: exec_generator(0, w), tier=plan_tier,
                    reasoning=reasoning_for, rephrase=rephrase,
                    progress=frozenset(),  # its one milestone, submitted, is any query at all
                    summary="the same questions answered by a SQL query, scored by execution accuracy")

__all__ = ["EXEC_SPEC", "SPEC", "SqlEnv", "SqlExecEnv"]

__getattr__ = moved_names(__name__, {
    **{n: "trajforge.envs.sql.results" for n in (
        "CELL_CHARS", "COUNT_LIMIT", "format_cell", "read_result", "render_rows", "result_contains", "typed_cell")},
    "MAX_VALUE_BYTES": "trajforge.envs.sql.env", "quote_ident": "trajforge.envs.sql.env",
    "QueryResult": "trajforge.envs.sql.env:SqlResult", "answers_match": "trajforge.envs.answers",
    "ensure_db": "trajforge.envs.sqldb", **ENV_MODULE_NAMES})
