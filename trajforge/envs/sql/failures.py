"""How a submitted SQL answer went wrong (the ``sql`` spec's ``wrong_answer`` hook).

In order, the first that holds:

- ``guessed_answer``: no query succeeded before the answer — it came from nowhere;
- ``empty_result_submitted``: the last query found nothing (no row, one row of NULLs, or a lone
  ``0`` that was then submitted) and the agent answered anyway instead of questioning it (a
  misspelled entity, or the wrong table);
- ``logic_break``: some result held the expected answer (the ``found_answer`` milestone) and a
  different one was submitted;
- ``retrieval_miss``: queries ran but the answer was never in any result.

``answer_grounded`` (the ``grounded`` hook) asks the same of an accepted answer: whether some
result held it, or it was a lucky guess (``6`` submitted after an error, with no query that
returned it).
"""

from __future__ import annotations

from trajforge.envs.answers import answers_match
from trajforge.envs.sql.results import found_nothing, read_result
from trajforge.envs.wrong_answers import last_ok, milestones
from trajforge.schema import Trajectory


def wrong_answer_kind(traj: Trajectory) -> str | None:
    last = last_ok(traj, "run_sql")
    if last is None:
        return "guessed_answer"
    try:
        cells = read_result(last.result.content)
    except ValueError:
        cells = None
    answer = traj.verdict.answer if traj.verdict else None
    if cells is not None and (found_nothing(cells) or (
            cells == [["0"]] and answer is not None and answers_match(answer, 0))):
        return "empty_result_submitted"
    return "logic_break" if "found_answer" in milestones(traj) else "retrieval_miss"


def answer_grounded(traj: Trajectory) -> bool:
    """Whether a shown result held the expected answer (the ``found_answer`` milestone)."""
    return "found_answer" in milestones(traj)
