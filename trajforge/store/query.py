"""SQL over a trajectory store with DuckDB: flat ``episodes`` and ``steps`` views over the shards.

    from trajforge.store.query import query
    query("store/", "SELECT fail_reason, count(*) n FROM episodes WHERE tier = 'hard' GROUP BY 1")

    trajforge query "SELECT policy, avg(reward_total) FROM episodes GROUP BY 1" --store store/

DuckDB reads the JSONL shards itself (``read_json`` with an explicit column list), so nothing is
loaded into Python first and 10,000+ episodes stay fast. The column list names only what the views
need: unnamed keys (messages, tool results, token ids) are never materialised, and a key a line
lacks (``outcome`` before grading: the store writes with ``exclude_none``) reads as NULL.

A line DuckDB cannot read as a record (torn by a crash, invalid UTF-8, a lone surrogate escape, not
an object) is skipped, as ``TrajectoryStore`` skips it, and counted: ``unreadable(con)`` says how
many per shard, and ``trajforge query`` prints that on stderr. A record of any size is read (the
object-size limit is raised to the largest shard), so one enormous line never fails the query.
An object without a trajectory's required fields is skipped and counted the same way.

The views hold what ``TrajectoryStore`` reads: one record per idempotency key (the first that is not
an ``env_fault``, else the first), and format-1 fail reasons under their current names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from trajforge.schema.records import V1_FAIL_REASONS
from trajforge.store.jsonl import TrajectoryStore

_PROBLEM = "STRUCT(kind VARCHAR, message VARCHAR, tool VARCHAR)"
_STEP = (
    f'STRUCT("index" BIGINT, raw VARCHAR, calls JSON[], errors {_PROBLEM}[], '
    "repairs STRUCT(kind VARCHAR, detail VARCHAR)[], results STRUCT(name VARCHAR, ok BOOLEAN, error VARCHAR)[])"
)
_COLUMNS: dict[str, str] = {
    "task_id": "VARCHAR", "sample": "BIGINT", "policy": "VARCHAR", "env": "VARCHAR",
    "tier": "VARCHAR", "split": "VARCHAR", "dialect": "VARCHAR", "toolset_fingerprint": "VARCHAR",
    "end": "VARCHAR", "wall_s": "DOUBLE", "executed": "BOOLEAN",
    "outcome": "STRUCT(tier VARCHAR, fail_reason VARCHAR, guessed BOOLEAN)",
    "reward": "STRUCT(completion DOUBLE, step DOUBLE, efficiency DOUBLE, violation DOUBLE, total DOUBLE)",
    "steps": f"{_STEP}[]",
    "sampling": "STRUCT(temperature DOUBLE, top_p DOUBLE, max_tokens BIGINT, seed BIGINT)",
    "format": "BIGINT",
}
_REQUIRED = ("task_id", "policy", "env", "toolset_fingerprint", "dialect")
"""A trajectory's fields without a default: a line lacking one is not a record (read as NULL)."""
_READABLE = " AND ".join(f"{k} IS NOT NULL" for k in _REQUIRED)
_KEY = ("task_id, policy, coalesce(sample, 0), sampling IS NULL, sampling.temperature, sampling.top_p, "
        "sampling.max_tokens, CASE WHEN sampling.temperature = 0 THEN NULL ELSE sampling.seed END")
"""``jsonl.key_of`` in SQL: no sampling is the old-style key, and greedy sampling ignores the seed."""
_IS_FAULT = """coalesce("end" = 'env_fault' OR outcome.tier = 'env_fault', false)"""
"""``jsonl.is_fault``: the record a later retry of its key supersedes."""
_V1_REASON = ("CASE outcome.fail_reason " + " ".join(f"WHEN '{old}' THEN '{new}'" for old, new in V1_FAIL_REASONS.items())
              + " ELSE outcome.fail_reason END")

EPISODES_SQL = """
CREATE VIEW episodes AS SELECT
    task_id, sample, policy, env, tier, split, dialect, toolset_fingerprint, "end", wall_s,
    coalesce(len(steps), 0) AS turns,
    outcome.tier AS outcome_tier,
    CASE WHEN coalesce("format", 1) = 1 THEN {v1_reason} ELSE outcome.fail_reason END AS fail_reason,
    outcome.tier IN ('success', 'recovered') AS correct,
    coalesce(outcome.guessed, false) AS guessed,
    reward.total AS reward_total, reward.completion AS reward_completion, reward.step AS reward_step,
    reward.efficiency AS reward_efficiency, reward.violation AS reward_violation,
    coalesce(list_sum([len(s.errors) for s in steps]), 0) AS n_errors,
    coalesce(list_sum([len(s.repairs) for s in steps]), 0) AS n_repairs,
    coalesce(executed, true) AS executed
FROM raw
""".format(v1_reason=_V1_REASON)

STEPS_SQL = """
CREATE VIEW steps AS SELECT
    task_id, policy, sample, s."index" AS step, s.raw AS raw,
    len(s.calls) AS n_calls,
    [e.kind for e in s.errors] AS error_kinds,
    [r.kind for r in s.repairs] AS repairs,
    len([r for r in s.results if not r.ok]) AS n_tool_errors
FROM (SELECT task_id, policy, sample, unnest(steps) AS s FROM raw)
"""

VIEWS = ("episodes", "steps")
_DEFAULT_OBJECT_SIZE = 16 * 1024 * 1024


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def connect(store_dir: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the ``episodes`` and ``steps`` views over a store."""
    shards = TrajectoryStore(store_dir).shards()
    if not shards:
        raise ValueError(f"no *.jsonl shards in {store_dir}")
    files = "[" + ", ".join(_quote(str(p)) for p in shards) + "]"
    columns = "{" + ", ".join(f"{_quote(k)}: {_quote(v)}" for k, v in _COLUMNS.items()) + "}"
    # DuckDB refuses the whole file at its first object over maximum_object_size (16 MiB by
    # default), ignore_errors or not; no line is longer than its shard.
    biggest = max(_DEFAULT_OBJECT_SIZE, *(p.stat().st_size + 1 for p in shards))
    con = duckdb.connect()
    # With ignore_errors an unreadable line reads as a row of NULLs (in ``lines``); dropping rows
    # without the required fields skips it, as TrajectoryStore's reader does.
    con.execute(f"CREATE VIEW lines AS SELECT * FROM read_json({files}, format='newline_delimited', "
                f"columns={columns}, ignore_errors=true, maximum_object_size={biggest}, filename=true)")
    # Duplicates of a key (a crash before a run's bookkeeping, racing runs, a resume retrying an
    # env_fault) collapse as TrajectoryStore collapses them; ``line`` is the shards' order.
    con.execute(f"CREATE VIEW raw AS SELECT * EXCLUDE (line) FROM "
                f"(SELECT *, row_number() OVER () AS line FROM lines WHERE {_READABLE}) "
                f"QUALIFY row_number() OVER (PARTITION BY {_KEY} ORDER BY {_IS_FAULT}, line) = 1")
    con.execute(EPISODES_SQL)
    con.execute(STEPS_SQL)
    return con


def unreadable(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Lines skipped as unreadable, per shard file name (only shards that had any)."""
    rows = run(con, f"SELECT filename, count(*) AS n FROM lines WHERE NOT ({_READABLE}) GROUP BY 1 ORDER BY 1")
    return {Path(row["filename"]).name: row["n"] for row in rows}


def run(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    """Run ``sql`` on a ``connect``-ed store; rows as dicts.

    Raises ValueError with DuckDB's own message (which names the bad column, table or token) when
    the SQL does not parse or bind.
    """
    try:
        cur = con.execute(sql)
        if cur.description is None:  # a statement without a result set (e.g. SET)
            return []
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]
    except duckdb.Error as e:
        raise ValueError(f"bad query ({type(e).__name__}): {e}; views: {', '.join(VIEWS)}") from e


def query(store_dir: str | Path, sql: str) -> list[dict[str, Any]]:
    """Run ``sql`` against the store's ``episodes`` / ``steps`` views; rows as dicts (see ``run``)."""
    con = connect(store_dir)
    try:
        return run(con, sql)
    finally:
        con.close()
