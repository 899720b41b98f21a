"""Outcome tiers and the fail_reason taxonomy.

- ``success``: the verifier accepted the answer and nothing went wrong on the way.
- ``recovered``: accepted, but a format error, a tool error or a marked mistake
  (``Step.mistake``: a self-repair demonstration's) happened first.
- ``failed``: with a ``fail_reason`` (below).
- ``env_fault``: the infrastructure failed (a declared ``InfraError``, a timeout of ours, a server
  error); such episodes are retried and never used as negatives.

An accepted episode is also marked ``guessed`` when its environment can tell that no result the
agent saw held the answer (``EnvSpec.grounded``; SQL: the ``found_answer`` milestone): a correct
``6`` submitted straight after an error is luck, not recovery.

An episode the harness ended on an exception while handling the model's turn (``end`` is
``harness_error``) is ``failed`` with that reason: what the model wrote is never infrastructure
(``trajforge.harness.faults``).

How a failed episode's reason is chosen, first that applies:

1. it submitted an answer that was wrong: the environment's finer kind of wrong answer
   (``EnvSpec.wrong_answer``: ``retrieval_miss``, ``logic_break``, ``empty_result_submitted``...),
   else ``wrong_answer``;
2. it ran out of turns: the problem of its last turn if that turn had one (it was stuck on an
   error: ``no_such_column``, ``malformed``...), else ``max_turns``;
3. the last turn that had a problem: its parse error's kind (``no_call``, ``malformed``...) or its
   tool error's kind (``no_such_column``, ``bad_url``...);
4. why the loop stopped (``Trajectory.end``), else ``no_answer``.

An episode whose conversation outgrew the model's context (``end`` is ``context_exceeded``: the
server refused the next prompt) is ``failed`` with that reason, whatever its last turn ran into.

``FAIL_REASONS`` names every reason the built-in environments and the harness give, each once,
with what it means (a test checks that every tool error kind raised under ``trajforge/envs`` is
listed). They are what ``trajforge query`` shows as ``fail_reason``, and what ``export --where
fail_reason=...`` and ``trajforge.store.filters.filter_trajectories`` select by. Environments
from elsewhere may add their own kinds. The outcome holds only the grade; what the environment
concluded stays in ``traj.verdict``.
"""

from __future__ import annotations

from trajforge._compat import moved_names
from trajforge.envs.registry import graded_spec
from trajforge.harness.faults import CONTEXT_EXCEEDED, HARNESS_ERROR, NOTES
from trajforge.schema import Outcome, Step, Trajectory, Verdict

FAIL_REASONS: dict[str, str] = {
    # -- the reply held no usable call (the parser's CallError kinds) --------------------------
    "no_call": "the reply contained no tool call",
    "malformed": "a tool call that could not be read (broken JSON or markup)",
    "truncated": "the reply was cut off inside a call, or was over the size cap",
    "unknown_tool": "a call to a tool the environment does not have",
    "invalid_args": "arguments that do not fit the tool's schema",
    # -- a tool refused the call: any environment ----------------------------------------------
    "tool_error": "a tool refused the call (a ToolError without a kind of its own)",
    "tool_exception": "a tool raised an undeclared exception on the model's arguments",
    # -- sql -------------------------------------------------------------------------------------
    "syntax_error": "SQL or Python the model wrote does not parse",
    "no_such_table": "a table that is not in the database",
    "no_such_column": "a column that none of the query's tables has",
    "no_such_function": "an SQL function that does not exist, or a wrong number of arguments",
    "ambiguous_column": "a column name that several joined tables have, unqualified",
    "read_only": "a write, schema or pragma statement (the database is read-only)",
    "query_limit": "a query past the time, memory or value-size limit",
    "sql_error": "any other error SQLite reported",
    "unsupported_answer": "submit_answer before any query succeeded, refused once (sql: nothing supports it)",
    # -- travel ----------------------------------------------------------------------------------
    "unknown_city": "a city that is not in the catalog",
    "bad_date": "a date that is not YYYY-MM-DD or is outside the bookable period",
    "bad_route": "origin and destination are the same city",
    "bad_nights": "a number of nights outside 1-14",
    "bad_name": "an empty or over-long passenger or guest name",
    "unknown_flight": "a flight id no search gave",
    "unknown_hotel": "a hotel id no search gave",
    "unknown_booking": "a booking id that does not exist",
    "sold_out": "no seat or room left",
    "duplicate_booking": "the same passenger booked twice on one flight",
    "already_cancelled": "cancelling a booking twice",
    # -- web -------------------------------------------------------------------------------------
    "bad_url": "a URL that is not one of the shop's pages",
    "bad_element": "an element number or name that is not on the page, or of the wrong kind",
    "bad_value": "a value the field or dropdown does not take, or a page part that does not exist",
    "no_form": "submit() with no form typed into",
    "http_error": "the shop answered an error page (400, 404, 500) for the request",
    # -- code ------------------------------------------------------------------------------------
    "bad_path": "a file path outside the work directory, or not a plain name",
    "bad_text": "file or code text with a NUL or a lone surrogate",
    "bad_arguments": "run_python without exactly one of code and path",
    "too_large": "a file or code over the 100 KB limit",
    "not_found": "a file that is not in the work directory",
    "run_budget": "run_python or run_tests after the episode's code used its total run time",
    # -- a submitted answer was wrong: any environment --------------------------------------------
    "wrong_answer": "the submitted answer was wrong (no finer kind known)",
    "retrieval_miss": "the expected answer never appeared in any tool result",
    "logic_break": "the expected answer appeared in a result and something else was submitted",
    "guessed_answer": "an answer submitted before any lookup succeeded (sql: no query ran)",
    "empty_result_submitted": "the last query found nothing and an answer was submitted anyway",
    # travel
    "missing_booking": "something asked for was not booked (and nothing wrong was)",
    "extra_booking": "a booking the task did not ask for, or one it said to cancel, is active",
    # web
    "several_placed": "more than one order or booking was placed",
    "wrong_kind": "an order for a booking task, or a booking for an order task",
    "wrong_item": "the wrong product, options or quantity (or the wrong class)",
    "over_budget": "the order total is over the task's budget",
    "wrong_form_value": "the wrong shipping, address, session, seats or attendee",
    # code (the submitted solution; syntax_error above)
    "import_error": "the submitted module raised when imported",
    "missing_function": "the submitted module does not define the asked function",
    "tests_timeout": "the hidden tests did not finish in time",
    "crashed_run": "the test run ended before reporting (the code exited or was killed)",
    "unreadable_results": "the test runner's report was tampered with or unreadable",
    "tests_failed": "the hidden tests ran and some failed",
    # -- the episode ended without an answer ---------------------------------------------------
    "max_turns": "the turn limit was reached before an answer",
    "max_errors": "too many consecutive turns without a valid call",
    "repeated_call": "the same calls with the same results, turn after turn, until the harness ended it",
    "context_exceeded": "its own replies and the results it asked for outgrew the model's context",
    "no_answer": "the episode ended without an answer, for no recorded reason",
    "harness_error": "the harness hit an exception while handling the model's turn",
    "grade_error": "grading this episode raised (it counts against the episode)",
    # -- env_fault tier (infrastructure; never a negative) --------------------------------------
    "env_fault": "an infrastructure fault without a kind of its own",
    "tool_crash": "a tool call failed on infrastructure and was retried (the harness's name)",
    "tool_timeout": "a tool call past its deadline",
    "env_start": "the environment could not start",
    "env_timeout": "the environment stopped answering",
    "env_lost": "the environment's worker was lost",
    "episode_timeout": "the episode's working time ran out",
    "request_timeout": "a model request past its deadline",
    "connection": "the model server could not be reached",
    "bad_response": "the model server's answer could not be read",
    "http_429": "the model server refused for rate limiting",
    "http_5xx": "the model server failed (http_500, http_503, ...)",
    "sql_worker": "the SQL worker process could not start or reopen the database",
    "sql_database": "the database file failed mid-episode (I/O error, corrupted, gone)",
    "web_session_lost": "the shop server lost the episode's session",
    "workdir": "the code work directory could not be written (disk full, no file descriptors)",
    "web_server_down": "the shop server did not answer",
    "sandbox": "the code sandbox could not start a process",
    "sandbox_unavailable": "the code sandbox failed its self-test (bubblewrap missing?)",
    "missing_dependency": "a tool needs a module this machine lacks",
}
"""Every fail reason, with what it means, grouped by where it comes from."""


def step_problem(step: Step) -> str | None:
    """The fail reason of a turn's problem (its parse error first, then its tool error), if any."""
    if step.errors:
        return step.errors[0].kind
    bad = next((r for r in step.results if not r.ok), None)
    return None if bad is None else bad.error or "tool_error"


def _last_problem(traj: Trajectory) -> str | None:
    """fail_reason of the last turn that had a problem."""
    return next((p for p in map(step_problem, reversed(traj.steps)) if p), None)


def _wrong_answer(traj: Trajectory) -> str:
    """The environment's finer kind of this wrong answer (``EnvSpec.wrong_answer``), else
    ``wrong_answer``. Grading never fails on it: an environment that is not installed here, or a
    hook that raises, gives the plain reason. Tool-list (``mcp:``) environments have none, and
    looking one up would import the user's module."""
    spec = graded_spec(traj.env)
    try:
        kind = spec.wrong_answer(traj) if spec and spec.wrong_answer else None
    except Exception:  # noqa: BLE001 - a broken hook: the plain reason
        kind = None
    return kind or "wrong_answer"


def _guessed(traj: Trajectory) -> bool:
    """Whether the environment says the accepted answer came from no result (``EnvSpec.grounded``
    returned False). Like ``_wrong_answer``, grading never fails on it."""
    spec = graded_spec(traj.env)
    try:
        return spec is not None and spec.grounded is not None and spec.grounded(traj) is False
    except Exception:  # noqa: BLE001 - a broken hook: not marked
        return False


def _failed_role(traj: Trajectory, answered: bool) -> str | None:
    """The pipeline role whose turn holds the failure (None without role tags): the last turn when
    the episode ``answered`` wrongly or ran out of turns (it submitted, or was still going), else
    the turn with the last parse or tool problem."""
    if not any(s.role_name for s in traj.steps):
        return None
    if not answered:
        for step in reversed(traj.steps):
            if step.errors or any(not r.ok for r in step.results):
                return step.role_name
    return traj.steps[-1].role_name


REASON_OF_END = {"max_turns": "max_turns", "repeated": "repeated_call"}
"""The fail reason of an episode the harness stopped, when its last turn ran into nothing itself."""


def grade(traj: Trajectory) -> Outcome:
    v = traj.verdict or Verdict()
    faults = [r for s in traj.steps for r in s.results if r.fault]
    if faults or traj.end == "env_fault":
        # The fault that ended it: the harness records it last and not retried (tool_timeout,
        # http_503, episode_timeout...); records without harness faults name the tool's error.
        # Notes (a degraded record, a grading error) ended nothing.
        ending = [f.kind for f in traj.faults if not f.retried and f.kind not in NOTES]
        reason = ending[-1] if ending else faults[0].error if faults else "env_fault"
        return Outcome(tier="env_fault", fail_reason=reason)
    if traj.end == HARNESS_ERROR:
        return Outcome(tier="failed", fail_reason=HARNESS_ERROR, failed_role=_failed_role(traj, False))
    if v.correct:
        # A turn marked as a mistake (a self-repair demonstration's wrong entity or template) is
        # trouble even when its call ran cleanly: its result did not answer the question.
        troubled = any(s.errors or s.mistake or any(not r.ok for r in s.results) for s in traj.steps)
        return Outcome(tier="recovered" if troubled else "success", guessed=_guessed(traj))
    if v.submitted:
        reason = _wrong_answer(traj)
    elif traj.end in ("max_turns", "repeated"):  # what the last turn ran into, else the limit itself
        reason = (step_problem(traj.steps[-1]) if traj.steps else None) or REASON_OF_END[traj.end]
    elif traj.end == CONTEXT_EXCEEDED:  # no next turn could be asked for, whatever the last ran into
        reason = CONTEXT_EXCEEDED
    else:
        reason = _last_problem(traj) or traj.end or "no_answer"
    answered = v.submitted or traj.end in ("max_turns", CONTEXT_EXCEEDED)
    return Outcome(tier="failed", fail_reason=reason, failed_role=_failed_role(traj, answered))


__getattr__ = moved_names(__name__, {"PARSE_REASON": "trajforge.grade.outcome:_PARSE_REASON"})
_PARSE_REASON = {k: k for k in ("no_call", "malformed", "truncated", "unknown_tool", "invalid_args")}
"""0.1 renamed parse error kinds into fail reasons with this table; they are the same names now."""
