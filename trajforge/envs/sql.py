"""SQL environment: answer questions about a retail SQLite database with four tools.

The agent explores the schema (``list_tables``, ``describe_table``), runs read-only queries
(``run_sql``) and ends the episode with ``submit_answer``. ``verify`` compares the submitted
answer with the task's expected value through ``answers_match``.

Safety, per episode: the database runs in a worker process (``sqlguard.py``, ``sqlworker.py``):
opened read-only, an authorizer allow-lists reads (so ATTACH, PRAGMA, writes and
``load_extension`` are refused before they run), a progress handler enforces a wall-clock deadline
that the host backs by killing the worker (so it holds inside a single function call too), the
worker's address space bounds each query's memory, ``SQLITE_LIMIT_LENGTH`` caps any single value,
and the rendered result is capped in rows, characters and per-cell length.

``run_sql`` output format (``read_result`` parses it back)::

    name|price
    Trail Running Shoes|129.99
    Yoga Mat|24.5
    (2 rows)

One header line, one line per row, cells joined by ``|``; inside a cell ``\\``, ``|`` and newlines
are escaped as ``\\\\``, ``\\|`` and ``\\n``; SQL NULL is ``NULL``; blobs show as
``<blob N bytes>``; a cell over 200 characters ends in ``...(+N chars)``. The last line is
always ``(N rows)`` (``(1 row)``) or ``... (truncated: 50 of 1234 rows shown)``.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any, NamedTuple

from trajforge.envs.base import Environment, ToolError, Verdict
from trajforge.envs.sqldb import ensure_db
from trajforge.envs.sqlguard import MEMORY_MB, GuardedDb

# The SQLite side (authorizer, limits, rendering) runs in the worker process: its module holds it.
from trajforge.envs.sqlworker import (  # noqa: F401 - re-exported for callers of this module
    CELL_CHARS,
    COUNT_LIMIT,
    MAX_VALUE_BYTES,
    format_cell,
    quote_ident,
    render_rows,
)
from trajforge.envs.sqlworker import authorize as _authorize  # noqa: F401
from trajforge.schema import Task


class QueryResult(NamedTuple):
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
        self.last_result: QueryResult | None = None
        self._db: GuardedDb | None = None
        self._schema: dict[str, str] = {}  # table -> compact description

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
        # The worker reads the schema before its authorizer goes in (describe_table needs PRAGMA,
        # the model doesn't get it).
        self._db = GuardedDb(Path(task.db) if task.db else ensure_db(task.seed))
        self._schema = self._db.schema
        return ""

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

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
        db = self._require_db()
        parts = ["The agent answers questions about this SQLite database by querying it "
                 "(read-only). The answer a plan submits must be exactly the result of its last "
                 "run_sql query: the value of a one-row result, or a one-column result as a "
                 "comma-separated list. Tables, with a few sample rows each:"]
        for table, description in self._schema.items():
            text, _ = db.query(f"SELECT * FROM {quote_ident(table)} LIMIT {int(sample_rows)}",
                               self.timeout_s, sample_rows, 1500)
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
        try:  # under the same deadline as any query: a plan's SQL never runs without one
            _, rows = self._require_db().query(query[:m.start()] + "LIMIT 2", self.timeout_s, 2,
                                               self.max_chars)
        except sqlite3.Error:
            return False
        return len(rows) == 2 and rows[0][-1] == rows[1][-1]

    # ---- tools ------------------------------------------------------------------------------

    def list_tables(self) -> str:
        """List the database tables."""
        self._require_db()
        self.reach("explored_schema")
        return ", ".join(self._schema)

    def describe_table(self, table: str) -> str:
        """Show a table's columns and types.

        Args:
            table: Table name.
        """
        self._require_db()
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
        db = self._require_db()
        if not re.match(r"\s*(\(\s*)*(select|with|values)\b", _strip_comments(query), re.I):
            raise ToolError("only read-only SELECT queries are allowed", kind="sql_error")
        try:
            text, cells = db.query(query, self.timeout_s, self.max_rows, self.max_chars)
        except (sqlite3.Error, sqlite3.Warning) as e:
            raise ToolError(self._explain(e), kind="sql_error") from None
        self.reach("query_ok")
        self.last_result = QueryResult(query, cells, complete=not text.rsplit("\n", 1)[-1]
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

    def _require_db(self) -> GuardedDb:
        if self._db is None:
            raise RuntimeError("SqlEnv used before reset(task)")  # caller bug -> env_fault
        return self._db

    def _explain(self, e: Exception) -> str:
        """Turn a sqlite3 exception into a short message the model can act on."""
        msg = str(e)
        if "interrupted" in msg:
            return f"query exceeded the {self.timeout_s:.1f} s time limit"
        if "not authorized" in msg or "readonly" in msg:
            return "only read-only SELECT queries are allowed"
        if "too big" in msg:
            return f"a value exceeded the {MAX_VALUE_BYTES} byte limit"
        if "out of memory" in msg:
            return f"query exceeded the {MEMORY_MB} MB memory limit"
        if "one statement at a time" in msg:
            return "run one SQL statement per call"
        return msg


def _strip_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*|/\*.*?(\*/|$)", " ", sql, flags=re.S)


# ---- result rendering (format_cell and render_rows: sqlworker.py) ------------------------

def read_result(text: str) -> list[list[str]]:
    """Parse ``run_sql`` output back into rows of cell strings (header and footer dropped)."""
    lines = text.split("\n")
    if len(lines) < 2:
        raise ValueError("not a run_sql result: expected a header and a footer line")
    return [_split_cells(line) for line in lines[1:-1]]


def _split_cells(line: str) -> list[str]:
    cells, buf, i = [], [], 0
    unescape = {"\\": "\\", "|": "|", "n": "\n", "r": "\r"}
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            buf.append(unescape.get(line[i + 1], line[i + 1]))
            i += 2
            continue
        if ch == "|":
            cells.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    cells.append("".join(buf))
    return cells


# ---- answer comparison ----------------------------------------------------------------------

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")
_LIST_SEP = re.compile(r"\s*(?:,|;|\n|\band\b|&)\s*", re.I)


def answers_match(submitted: Any, expected: Any) -> bool:
    """Whether a submitted answer matches the expected one.

    Numbers: the submission must contain exactly one number ("7", "7.0", "$1,234.50",
    "The answer is 7"), equal within abs 0.01 or rel 1e-4 — a string listing many numbers
    must not match by luck. Strings: case- and whitespace-insensitive. Lists: order-free sets;
    the submission may be a JSON list or items separated by commas, newlines or "and".
    """
    if submitted is None or expected is None:
        return False
    if isinstance(expected, (list, tuple)):
        return _as_set(submitted) == {_norm(e) for e in expected}
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        value = _one_number(submitted)
        return value is not None and _close(value, float(expected))
    return _norm(submitted) == _norm(expected)


def typed_cell(cell: str) -> Any:
    """A result cell as an expected value: int or float when it reads as a number, else text."""
    if re.fullmatch(r"-?\d+", cell):
        return int(cell)
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+)(e[-+]?\d+)?", cell, re.I):
        return float(cell)
    return cell


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 0.01 or abs(a - b) <= 1e-4 * abs(b)


def _one_number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    found = _NUMBER.findall(str(value))
    if len(found) != 1:
        return None
    return float(found[0].replace(",", ""))


def _norm(value: Any) -> str:
    """Casefold, collapse whitespace, drop surrounding quotes and a trailing period."""
    text = " ".join(str(value).split()).casefold()
    return text.rstrip(".").strip().strip("\"'`").strip()


def _as_set(submitted: Any) -> set[str]:
    items: Any = submitted
    if isinstance(submitted, str) and submitted.strip().startswith("["):
        try:
            items = json.loads(submitted)
        except json.JSONDecodeError:
            items = submitted.strip().strip("[]")
    if isinstance(items, str):
        items = _LIST_SEP.split(items)
    if not isinstance(items, (list, tuple)):
        items = [items]
    # Bullets ("- Ana Silva", "1. Ana Silva") are how models often write lists.
    cleaned = (re.sub(r"^\s*(?:[-*\u2022]|\d+[.)])\s+", "", str(i)) for i in items)
    return {n for n in (_norm(i) for i in cleaned) if n}


def result_contains(cells: list[list[str]], expected: Any) -> bool:
    """Whether query result cells contain the expected answer (all items, for lists)."""
    if expected is None:
        return False
    flat = [c for row in cells for c in row]
    if isinstance(expected, (list, tuple)):
        have = {_norm(c) for c in flat}
        return bool(expected) and all(_norm(e) in have for e in expected)
    return any(answers_match(c, expected) for c in flat)
