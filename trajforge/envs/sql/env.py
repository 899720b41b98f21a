"""SQL environment: answer questions about a retail SQLite database with four tools.

The agent explores the schema (``list_tables``, ``describe_table``), runs read-only queries
(``run_sql``) and ends the episode with ``submit_answer``. ``verify`` compares the submitted
answer with the task's expected value through ``answers_match``.

Safety, per episode: the database file is opened read-only, an authorizer allow-lists reads
(so ATTACH, PRAGMA, writes and ``load_extension`` are refused before they run), a progress
handler enforces a wall-clock deadline, ``SQLITE_LIMIT_LENGTH`` caps any single value, and the
rendered result is capped in rows, characters and per-cell length.

The ``run_sql`` output format is ``envs/sql/results.py``'s.
"""

from __future__ import annotations

import math
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from trajforge.envs.answers import answers_match
from trajforge.envs.base import Environment, ToolError, Verdict
from trajforge.envs.sql.results import render_rows, result_contains, typed_cell
from trajforge.envs.sqldb import ensure_db
from trajforge.schema import Task

# Authorizer allow-list: SELECT, reading columns, calling functions and recursive CTEs. Anything
# else (ATTACH, PRAGMA, transactions, every write, schema changes) is denied while the statement
# is prepared, so it never runs. VACUUM INTO starts with an ATTACH and is refused too.
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                              sqlite3.SQLITE_RECURSIVE})
# Functions that touch the filesystem or process in some SQLite builds.
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"})

MAX_VALUE_BYTES = 1_000_000
"""SQLITE_LIMIT_LENGTH: no string or blob may grow past this (``zeroblob(10**8)`` fails fast)."""
_PROGRESS_OPS = 1000
"""The deadline is checked every this many SQLite VM instructions."""


class SqlResult(NamedTuple):
    """The last successful ``run_sql``: what synthesis reads a task's expected answer from."""

    query: str
    rows: list[list[str]]
    """Cells of the rows shown to the agent."""
    complete: bool
    """False when rows were cut (row or character cap), so ``rows`` is not the whole answer."""


class SqlEnv(Environment):
    """Answer questions about a retail database by querying it."""

    name = "sql"
    tool_names = ("list_tables", "describe_table", "run_sql", "submit_answer")
    final_tool = "submit_answer"
    # The database is read-only, so the episode state is what the agent submitted and saw last.
    state_fields = ("answer", "last_result")

    def __init__(self, seed: int = 0, timeout_s: float = 2.0, max_rows: int = 50,
                 max_chars: int = 4000):
        super().__init__(seed=seed)
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self.max_chars = max_chars
        self.answer: str | None = None
        self.last_result: SqlResult | None = None
        self._conn: sqlite3.Connection | None = None
        self._schema: dict[str, str] = {}  # table -> compact description
        self._deadline = math.inf

    # ---- episode lifecycle ------------------------------------------------------------------

    def reset(self, task: Task) -> str:
        """Open a fresh read-only connection on the task's database (``task.db`` when set, else
        the generated one for ``task.seed``)."""
        super().reset(task)
        self.close()
        self.answer = None
        self.last_result = None
        if task.db is not None and not Path(task.db).is_file():
            raise FileNotFoundError(f"task {task.id}: database file {task.db} does not exist")
        self._conn = _open_readonly(Path(task.db) if task.db else ensure_db(task.seed))
        # Read the schema before the authorizer goes in: describe_table needs PRAGMA, the model
        # doesn't get it.
        self._schema = _describe_all(self._conn)
        self._conn.set_authorizer(_authorize)
        self._conn.set_progress_handler(self._check_deadline, _PROGRESS_OPS)
        return ""

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def verify(self) -> Verdict:
        expected = self.task.expected if self.task else None
        submitted = self.answer is not None
        correct = submitted and answers_match(self.answer, expected)
        detail = (f"expected {expected!r}, got {self.answer!r}" if submitted
                  else "no answer submitted")
        return Verdict(submitted=submitted, answer=self.answer, correct=correct,
                       milestones=list(self.milestones), detail=detail)

    # ---- synthesis hooks --------------------------------------------------------------------

    def describe_for_synthesis(self, sample_rows: int = 3) -> str:
        """The database a task writer must know: every table's columns and a few rows."""
        conn = self._require_conn()
        parts = ["The agent answers questions about this SQLite database by querying it "
                 "(read-only). The answer a plan submits must be exactly the result of its last "
                 "run_sql query: the value of a one-row result, or a one-column result as a "
                 "comma-separated list. Tables, with a few sample rows each:"]
        for table, description in self._schema.items():
            cursor = conn.execute(f"SELECT * FROM {quote_ident(table)} LIMIT {int(sample_rows)}")
            text, _ = render_rows([d[0] for d in cursor.description], cursor, sample_rows, 1500)
            parts.append(f"{description}\n{text}")
        return "\n\n".join(parts)

    def expected_outcome(self) -> Any:
        """The answer the plan's last query produced, provided the submission states it.

        Precisely: the episode must have submitted an answer and run at least one query; the last
        query's result must be complete and non-empty; then the expected answer is the whole
        column when the result is one column of several rows (a list answer), or the cell of a
        one-row result that the submission matches (a number or a name). Anything else raises
        ``ToolError`` with the reason as its kind. A top-1 query (``... LIMIT 1``) whose last column
        ties with the runner-up is ``ambiguous_answer``: the question has two right answers.
        """
        if self.answer is None:
            raise ToolError("the plan never submitted an answer", kind="no_final_call")
        last = self.last_result
        if last is None:
            raise ToolError("the plan ran no query, so its answer comes from nowhere", kind="no_query")
        if not last.complete:
            raise ToolError("the last query's result was cut at the row/character cap",
                            kind="truncated_result")
        if not last.rows or all(c == "NULL" for row in last.rows for c in row):
            raise ToolError("the last query returned no rows or only NULL", kind="empty_result")
        if len(last.rows[0]) == 1 and len(last.rows) > 1:
            expected: Any = [row[0] for row in last.rows]
            if not answers_match(self.answer, expected):
                raise ToolError(f"submitted {self.answer!r} but the last query returned the list "
                                f"{expected!r}", kind="verify_failed")
            return expected
        if len(last.rows) > 1:
            raise ToolError(f"the last query returned {len(last.rows)} rows of "
                            f"{len(last.rows[0])} columns; end with a query whose result is the "
                            "answer", kind="ambiguous_answer")
        matches = [typed_cell(c) for c in last.rows[0] if answers_match(self.answer, typed_cell(c))]
        if not matches:
            raise ToolError(f"submitted {self.answer!r} but the last query returned "
                            f"{last.rows[0]!r}", kind="verify_failed")
        if len(last.rows[0]) > 1 and self._ties_runner_up(last.query):
            raise ToolError("the top row ties with the runner-up", kind="ambiguous_answer")
        return matches[0]

    def _ties_runner_up(self, query: str) -> bool:
        """For ``... LIMIT 1``: does the second row carry the same last-column value?"""
        m = re.search(r"\blimit\s+1\s*;?\s*$", query, re.I)
        if m is None:
            return False
        try:
            rows = self._require_conn().execute(query[:m.start()] + "LIMIT 2").fetchall()
        except sqlite3.Error:
            return False
        return len(rows) == 2 and rows[0][-1] == rows[1][-1]

    # ---- tools ------------------------------------------------------------------------------

    def list_tables(self) -> str:
        """List the database tables."""
        self._require_conn()
        self.reach("explored_schema")
        return ", ".join(self._schema)

    def describe_table(self, table: str) -> str:
        """Show a table's columns and types.

        Args:
            table: Table name.
        """
        self._require_conn()
        key = table.strip().strip("\"'`[]").lower()
        if key not in self._schema:
            raise ToolError(f"no table {table!r}; tables: {', '.join(self._schema)}",
                            kind="unknown_table")
        self.reach("explored_schema")
        return self._schema[key]

    def run_sql(self, query: str) -> str:
        """Run one read-only SQLite SELECT query.

        Args:
            query: The SQL query.
        """
        conn = self._require_conn()
        if not re.match(r"\s*(\(\s*)*(select|with|values)\b", _strip_comments(query), re.I):
            raise ToolError("only read-only SELECT queries are allowed", kind="sql_error")
        self._deadline = time.monotonic() + self.timeout_s
        try:
            cursor = conn.execute(query)
            columns = [d[0] for d in cursor.description or ()]
            text, cells = render_rows(columns, cursor, self.max_rows, self.max_chars)
        except (sqlite3.Error, sqlite3.Warning) as e:
            raise ToolError(self._explain(e), kind="sql_error") from None
        finally:
            self._deadline = math.inf
        self.reach("query_ok")
        self.last_result = SqlResult(query, cells, complete=not text.rsplit("\n", 1)[-1]
                                       .startswith("... (truncated"))
        if self.task is not None and result_contains(cells, self.task.expected):
            self.reach("found_answer")
        return text

    def submit_answer(self, answer: str) -> str:
        """Submit your final answer.

        Args:
            answer: The answer, e.g. a number or a name.
        """
        self.answer = str(answer)
        self.reach("submitted")
        return "Answer submitted."

    # ---- helpers ----------------------------------------------------------------------------

    def _require_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("SqlEnv used before reset(task)")  # caller bug -> env_fault
        return self._conn

    def _check_deadline(self) -> int:
        # A non-zero return makes SQLite abort the statement with "interrupted".
        return int(time.monotonic() > self._deadline)

    def _explain(self, e: Exception) -> str:
        """Turn a sqlite3 exception into a short message the model can act on."""
        msg = str(e)
        if "interrupted" in msg:
            return f"query exceeded the {self.timeout_s:.1f} s time limit"
        if "not authorized" in msg or "readonly" in msg:
            return "only read-only SELECT queries are allowed"
        if "too big" in msg:
            return f"a value exceeded the {MAX_VALUE_BYTES} byte limit"
        if "one statement at a time" in msg:
            return "run one SQL statement per call"
        return msg


def _open_readonly(path: Path) -> sqlite3.Connection:
    # check_same_thread=False: the harness may run tools from a worker thread; each episode
    # still has its own connection, so no connection is used concurrently.
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True,
                           check_same_thread=False, isolation_level=None)
    if hasattr(conn, "enable_load_extension"):  # absent when Python is built without it
        conn.enable_load_extension(False)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 20_000)
    return conn


def _authorize(action: int, arg1: Any, arg2: Any, dbname: Any, source: Any) -> int:
    if action not in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _describe_all(conn: sqlite3.Connection) -> dict[str, str]:
    """``{table: "orders(id INTEGER, customer_id INTEGER -> customers.id, ...); 300 rows"}``."""
    out: dict[str, str] = {}
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY rowid")]
    for table in tables:
        name = quote_ident(table)  # user databases may name tables "order items" or "select"
        refs = {r[3]: f"{r[2]}.{r[4]}" for r in conn.execute(f"PRAGMA foreign_key_list({name})")}
        cols = []
        for _, col, ctype, *_ in conn.execute(f"PRAGMA table_info({name})"):
            cols.append(f"{col} {ctype}" + (f" -> {refs[col]}" if col in refs else ""))
        n = conn.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0]
        out[table.lower()] = f"{table}({', '.join(cols)}); {n} rows"
    return out


def quote_ident(name: str) -> str:
    """A SQLite identifier, double-quoted so any table name is safe in a statement."""
    return '"' + name.replace('"', '""') + '"'


def _strip_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*|/\*.*?(\*/|$)", " ", sql, flags=re.S)
