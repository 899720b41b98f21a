"""SQL environment: answer questions about a retail SQLite database with four tools.

The agent explores the schema (``list_tables``, ``describe_table``), runs read-only queries
(``run_sql``) and ends the episode with ``submit_answer`` (refused once while no query has
succeeded: ``REFUSE_UNSUPPORTED``). ``verify`` compares the submitted answer with the task's
expected value through ``answers_match``.

Safety, per episode: the database runs in a worker process (``sqlguard.py``, ``sqlworker.py``):
opened read-only, an authorizer allow-lists reads (so ATTACH, PRAGMA, writes and
``load_extension`` are refused before they run), a progress handler enforces a wall-clock deadline
that the host backs by killing the worker (so it holds inside a single function call too), the
worker's address space bounds each query's memory, ``SQLITE_LIMIT_LENGTH`` caps any single value,
and the rendered result is capped in rows, characters and per-cell length.

The ``run_sql`` output format is ``envs/sql/results.py``'s.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any, NamedTuple

from trajforge.envs.answers import answers_match
from trajforge.envs.base import Environment, InfraError, ToolError, Verdict
from trajforge.envs.sql.dbfile import check_database
from trajforge.envs.sql.hints import EMPTY_NOTE, sql_error, tables_hint
from trajforge.envs.sql.results import found_nothing, names_in, result_contains, spells_answer, typed_cell
from trajforge.envs.sql.worlds import world_db
from trajforge.envs.sqlguard import MEMORY_MB, GuardedDb, ResultSet

# The SQLite side (authorizer, limits, rendering) runs in the worker process: its module holds it.
from trajforge.envs.sqlworker import MAX_VALUE_BYTES, quote_ident  # noqa: F401 - re-exported
from trajforge.envs.sqlworker import authorize as _authorize  # noqa: F401
from trajforge.parse.limits import short
from trajforge.schema import Task



REFUSE_UNSUPPORTED = 1
"""How many times an episode's ``submit_answer`` is refused while no query has succeeded (0:
never). Nothing the agent saw can support such an answer: it is a guess, almost always made
straight after a failed query. Refusing it once turns that guess back into a second look at the
error, which names what exists (``sql/hints.py``); a second submission is taken, so an agent that
insists still ends its episode (``guessed_answer`` when wrong, ``Outcome.guessed`` when right).
Measured on the recipes' 186 held-out tasks (stop 44, README "An answer no query supports is
refused once"): of the 29 episodes with an error of the embedded model's SFT adapter, 1 recovered
without the refusal and 9 with it, none broken; refusing twice rescued no more. Only what the
agent saw decides, never the expected answer. Refusing also an answer that only an empty result
supports (a lone count of 0, no row) fixed 2 and broke 2 of the 186 (stop 45: the model submits the
same 0 again), so an empty result is only said (``EMPTY_NOTE``), never refused."""


def unsupported_answer(answer: str) -> str:
    """The refusal's text: why the answer was not taken and what to do instead."""
    return (f"not submitted: no query has succeeded yet, so no result supports {short(answer)}. Fix the "
            "query (the error above names what exists), run it, and submit what it returns.")


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
    # The database is read-only, so the episode state is what the agent submitted and saw last
    # (and how many unsupported answers it was refused).
    state_fields = ("answer", "last_result", "refused")
    synthesis_intro = ("The agent answers questions about this SQLite database by querying it "
                       "(read-only). The answer a plan submits must be exactly the result of its "
                       "last run_sql query: the value of a one-row result, or a one-column result "
                       "as a comma-separated list.")
    """What a task writer is told first (``describe_for_synthesis``)."""

    def __init__(self, seed: int = 0, timeout_s: float = 2.0, max_rows: int = 50,
                 max_chars: int = 4000, refuse_unsupported: int = REFUSE_UNSUPPORTED):
        super().__init__(seed=seed)
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self.max_chars = max_chars
        self.refuse_unsupported = refuse_unsupported
        self.answer: str | None = None
        self.last_result: SqlResult | None = None
        self.refused = 0
        self._db: GuardedDb | None = None
        self._schema: dict[str, str] = {}  # table -> compact description

    # ---- episode lifecycle ------------------------------------------------------------------

    def reset(self, task: Task) -> str:
        """Open a fresh read-only connection on the task's database (``task.db`` when set, else
        the generated one for ``task.seed`` in ``task.world``)."""
        super().reset(task)
        self.close()
        self.answer = None
        self.last_result = None
        self.refused = 0
        check_database(task)  # the file a task was made on, unchanged (by its content hash)
        # The worker reads the schema before its authorizer goes in (describe_table needs PRAGMA,
        # the model doesn't get it).
        self._db = GuardedDb(Path(task.db) if task.db else world_db(task.seed, task.world))
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
        parts = [self.synthesis_intro + " Tables, with a few sample rows each:"]
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
            raise ToolError(f"no table {short(table)}; {tables_hint(key, list(self._schema))}",
                            kind="no_such_table")
        self.reach("explored_schema")
        return self._schema[key]

    def run_sql(self, query: str) -> str:
        """Run one read-only SQLite SELECT query.

        Args:
            query: The SQL query.
        """
        return self._shown(query)

    def full_result(self, query: str, max_rows: int) -> ResultSet:
        """The query's whole result as values, up to ``max_rows`` rows (``complete`` False past
        that), under the same checks and deadline as ``run_sql``; ToolError when it fails."""
        db = self._require_db()
        _require_select(query)
        try:
            return db.rows(query, self.timeout_s, max_rows)
        except (sqlite3.Error, sqlite3.Warning) as e:
            raise ToolError(self._explain(e), kind="sql_error") from None

    def _shown(self, query: str, offset: int = 0) -> str:
        """``run_sql``: the result as the agent sees it, from row ``offset`` on."""
        db = self._require_db()
        _require_select(query)
        if offset < 0:
            raise ToolError("offset must be 0 or more", kind="invalid_args")
        try:
            text, cells = db.query(query, self.timeout_s, self.max_rows, self.max_chars, offset)
        except (sqlite3.Error, sqlite3.Warning) as e:
            raise ToolError(self._explain(e), kind="sql_error") from None
        self.reach("query_ok")
        self.last_result = SqlResult(query, cells, complete=not offset and not text.rsplit("\n", 1)[-1]
                                       .startswith("... ("))
        if self._shows_answer(cells, query):
            self.reach("found_answer")
        return text

    def _shows_answer(self, cells: list[list[str]], query: str) -> bool:
        """Whether a shown result holds the task's expected answer (the ``found_answer`` milestone),
        found in the data: a query that reads no table (``SELECT 3 + 4``) or writes the answer
        itself (``SELECT '7' FROM t``) found nothing, else guessing behind such a query would grade
        grounded and earn the milestone's reward. (Arithmetic on literals beside a table,
        ``SELECT 3 + 4 FROM t``, still passes: the rule catches a written answer, not every
        computation of one.)"""
        return (self.task is not None and result_contains(cells, self.task.expected)
                and bool(names_in(query) & set(self._schema)) and not spells_answer(query, self.task.expected))

    def submit_answer(self, answer: str) -> str:
        """Submit your final answer.

        Args:
            answer: The answer, e.g. a number or a name.
        """
        if self.last_result is None and self.refused < self.refuse_unsupported:
            self.refused += 1
            raise ToolError(unsupported_answer(str(answer)), kind="unsupported_answer")
        self.answer = str(answer)
        self.reach("submitted")
        return "Answer submitted."

    # ---- helpers ----------------------------------------------------------------------------

    @property
    def tables(self) -> list[str]:
        """The open database's tables, as ``describe_table`` names them (lower case)."""
        return list(self._schema)

    def _require_db(self) -> GuardedDb:
        if self._db is None:
            raise InfraError("SqlEnv used before reset(task)")  # caller bug -> env_fault
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
        if "null character" in msg or "surrogates not allowed" in msg or "can't encode" in msg:
            return "the query contains a character SQL text cannot hold (a NUL or a lone surrogate)"
        return msg

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run a tool, then the SQL error path for every tool at once: an ``sql_error`` a tool
        raised gets its finer kind and what exists instead (``sql/hints.py``), a database file that
        failed becomes an InfraError, and a ``run_sql`` result that found nothing says so."""
        try:
            out = super().call_tool(name, arguments)
        except ToolError as e:
            if e.kind != "sql_error":
                raise
            query = arguments.get("query")
            raise sql_error(str(e), query if isinstance(query, str) else "", self._schema) from None
        last = self.last_result
        if name == "run_sql" and last is not None and last.complete and found_nothing(last.rows):
            out += f" — {EMPTY_NOTE}"  # on the footer line: the run_sql format keeps it last
        return out


def _require_select(query: str) -> None:
    # The authorizer refuses writes anyway; this says so before a worker is even asked.
    if not re.match(r"\s*(\(\s*)*(select|with|values)\b", _strip_comments(query), re.I):
        raise ToolError("only read-only SELECT queries are allowed", kind="sql_error")


def _strip_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*|/\*.*?(\*/|$)", " ", sql, flags=re.S)
