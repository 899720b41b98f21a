"""How a finished travel request went wrong (the ``travel`` spec's ``wrong_answer`` hook).

Read off the verdict's detail (the bookings ``verify`` found missing or extra) and milestones:

- ``retrieval_miss``: an expected booking is missing and no search ever listed an expected item
  (no ``found_option``): the agent never looked where the answer was;
- ``logic_break``: a search listed it, yet another item was booked in its place (missing and
  extra both);
- ``missing_booking``: something asked for was not booked, and nothing wrong was;
- ``extra_booking``: everything asked for was booked, plus something that was not (or an
  existing booking the task said to cancel is still active).
"""

from __future__ import annotations

from trajforge.envs.travel.env import EXTRA, MISSING
from trajforge.envs.wrong_answers import milestones
from trajforge.schema import Trajectory


def wrong_answer_kind(traj: Trajectory) -> str | None:
    problems = (traj.verdict.detail if traj.verdict else "").split("; ")
    missing = any(p.startswith(MISSING) for p in problems)
    extra = any(p.startswith(EXTRA) for p in problems)
    if missing and "found_option" not in milestones(traj):
        return "retrieval_miss"
    if missing and extra:
        return "logic_break"
    return "missing_booking" if missing else "extra_booking" if extra else None
