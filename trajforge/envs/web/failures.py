"""How a web order or booking went wrong (the ``web`` spec's ``wrong_answer`` hook).

- ``retrieval_miss``: the agent never reached the page of a product or class the task needs (no
  ``locate`` milestone), so whatever it placed was not the thing asked for;
- ``several_placed``: more than one order or booking;
- ``wrong_kind`` (an order for a booking task, or the reverse), ``wrong_item`` (the product, its
  options or its quantity), ``over_budget``, ``wrong_form_value`` (shipping, ship-to address,
  session, seats, attendee): what the verdict's detail says differs (``shop/goals.py``).
"""

from __future__ import annotations

from trajforge.envs.web.env import SEVERAL_PLACED
from trajforge.envs.web.shop.goals import mismatch_kind
from trajforge.envs.wrong_answers import milestones
from trajforge.schema import Trajectory


def wrong_answer_kind(traj: Trajectory) -> str | None:
    if "locate" not in milestones(traj):
        return "retrieval_miss"
    detail = traj.verdict.detail if traj.verdict else ""
    if detail.endswith(SEVERAL_PLACED):
        return "several_placed"
    # "order #3: shipping is standard, expected express"
    return mismatch_kind(detail.split(": ", 1)[1]) if ": " in detail else None
