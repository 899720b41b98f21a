"""The ``sql-exec`` environment: answer with a query, scored by execution accuracy.

Text-to-SQL is scored by what a query *returns*: the agent explores the database as in ``sql``
(``list_tables``, ``describe_table``, ``run_sql``), then ends with ``submit_query(query)``. The
submitted query runs in full (up to ``max_result_rows`` rows, far more than the 50 an agent is
shown) and ``verify`` compares its result with the gold query's, stored as the task's expected
value (``compare.py``: rows as a multiset or a set, columns up to permutation, float tolerance,
order only under the gold's outer ORDER BY).

A long result is paged: ``run_sql(query, offset=50)`` shows rows 51-100, and every result's last
line counts its rows. A submitted query that fails (bad SQL, a write, the time limit) is an error
the agent sees, and the episode goes on: it can fix the query and submit again.

This is its own environment (not a flag on ``sql``) because its tools differ, and a toolset is
what a fingerprint names: ``sql`` and ``sql-exec`` trajectories each carry their own, one pool may
hold both, and ``trajforge synth --env sql --questions`` makes ``sql-exec`` tasks for the
questions whose answer is not one value. ``synth --env sql-exec`` gives every task this mode
(built-in templates too).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from trajforge.envs.base import ToolError, Verdict
from trajforge.envs.sql.compare import compare_results, gold_expected, is_result_expectation
from trajforge.envs.sql.env import SqlEnv
from trajforge.envs.sqlguard import ResultSet
from trajforge.schema import Task

MAX_RESULT_ROWS = 10_000
"""Rows a submitted (or gold) query may return; a larger result is never a correct one."""


class Submission(NamedTuple):
    """The query the agent submitted and its whole result."""

    query: str
    result: ResultSet


class SqlExecEnv(SqlEnv):
    """Answer questions about a database with a SQL query whose result is compared with the gold one."""

    name = "sql-exec"
    tool_names = ("list_tables", "describe_table", "run_sql", "submit_query")
    final_tool = "submit_query"
    instructions = ("Answer the question with a SQL query. Explore the database with list_tables, "
                    "describe_table and run_sql (a long result is shown 50 rows at a time: pass "
                    "offset to see more), then call submit_query with the query whose result "
                    "answers the question; its whole result is compared with the correct one.")
    state_fields = ("submitted", "last_result")
    synthesis_intro = ("The agent answers questions about this SQLite database with a read-only SQL "
                       "query. A plan ends with submit_query(query): that query's whole result is "
                       "the answer, compared with the agent's query by execution.")
    max_result_rows = MAX_RESULT_ROWS

    def __init__(self, seed: int = 0, timeout_s: float = 2.0, max_rows: int = 50,
                 max_chars: int = 4000):
        super().__init__(seed=seed, timeout_s=timeout_s, max_rows=max_rows, max_chars=max_chars)
        self.submitted: Submission | None = None

    def reset(self, task: Task) -> str:
        self.submitted = None
        return super().reset(task)

    def verify(self) -> Verdict:
        expected = self.task.expected if self.task else None
        if self.submitted is None:
            return Verdict(milestones=list(self.milestones), detail="no query submitted")
        if not is_result_expectation(expected):
            match_ok, detail = False, "the task has no gold result to compare with"
        else:
            match_ok, detail = compare_results(expected, self.submitted.result)
        return Verdict(submitted=True, answer=self.submitted.query, correct=match_ok,
                       milestones=list(self.milestones), detail=detail)

    def expected_outcome(self) -> Any:
        """The gold expectation the submitted query defines: its whole result, its order, and the
        comparison the task asks for (``task.expected["compare"]`` of the candidate, ``multiset``
        when it names none; the rows always come from the execution)."""
        if self.submitted is None:
            raise ToolError("the plan never submitted a query", kind="no_final_call")
        query, result = self.submitted
        if not result.complete:
            raise ToolError(f"the query returns more than {self.max_result_rows} rows (or more data "
                            "than a result may hold)", kind="result_too_large")
        asked = self.task.expected if self.task is not None else None
        compare = asked.get("compare", "multiset") if isinstance(asked, dict) else "multiset"
        return gold_expected(result, query, compare)

    # ---- tools ------------------------------------------------------------------------------

    def run_sql(self, query: str, offset: int = 0) -> str:
        """Run one read-only SQLite SELECT query; a long result is shown 50 rows at a time.

        Args:
            query: The SQL query.
            offset: Rows to skip before the ones shown (50 shows rows 51-100).
        """
        return self._shown(query, offset)

    def submit_query(self, query: str) -> str:
        """Submit the SQL query whose result answers the question.

        Args:
            query: The SQL query (read-only SELECT).
        """
        result = self.full_result(query, self.max_result_rows)
        self.submitted = Submission(query, result)
        self.reach("submitted")
        size = f"{len(result.rows)}{'' if result.complete else '+'}"
        return f"Query submitted ({size} rows, {len(result.columns)} columns)."

    def _shows_answer(self, cells: list[list[str]], query: str) -> bool:
        return False  # the answer is a whole result, not a value a page could show


__all__ = ["MAX_RESULT_ROWS", "SqlExecEnv", "Submission"]
