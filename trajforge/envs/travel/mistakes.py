"""The travel environment's realistic mistakes for self-repair demonstrations (``EnvSpec.mistakes``).

Only searches and lookups go wrong here, never a booking, so the rest of the reference stays
valid:

- ``wrong_entity``: a near-miss city name (one letter short): ``unknown city``, with the close
  names suggested;
- ``bad_date``: the date written day-first (``07/12/2026``): the error shows the format;
- ``nearest_template``: another template's first search with this task's entities (a hotel search
  where a flight was asked, or the other way round);
- ``intermediate``: the forecast of the destination instead of the search: a real result that
  books nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from trajforge.envs.mistakes import first_call, nearest_template, with_args
from trajforge.schema import Mistake, Task, ToolCall

SEARCHES = ("search_flights", "search_hotels")
READS = (*SEARCHES, "get_weather", "list_bookings")


def travel_mistakes(task: Task, pool: Sequence[Task]) -> list[Mistake]:
    at = first_call(task, SEARCHES)
    if at is None:
        return []
    call = task.reference[at]
    out: list[Mistake] = []
    key = "origin" if "origin" in call.arguments else "city"
    city = str(call.arguments.get(key, ""))
    if len(city) > 3:
        out.append(Mistake(kind="wrong_entity", at=at, calls=(with_args(call, **{key: city[:-1]}),),
                           recovery=f"There is no city {city[:-1]}; the error suggests {city}, the one asked for."))
    date_key = "date" if "date" in call.arguments else "check_in"
    day = str(call.arguments.get(date_key, ""))
    if len(day) == 10 and day[4] == "-":
        y, m, d = day.split("-")
        out.append(Mistake(kind="bad_date", at=at, calls=(with_args(call, **{date_key: f"{d}/{m}/{y}"}),),
                           recovery=f"Dates are written YYYY-MM-DD, so {day}."))
    near = nearest_template(task, pool, READS, "That search is not what this request needs; I'll search for what it asks.")
    if near is not None:
        out.append(near)
    place = str(call.arguments.get("destination") or call.arguments.get("city") or "")
    if place and day and date_key == "date" and not any(c.name == "get_weather" for c in task.reference):
        out.append(Mistake(kind="intermediate", at=at,
                           calls=(ToolCall(name="get_weather", arguments={"city": place, "date": day}),),
                           recovery="The forecast does not book anything; I still need the search."))
    return out
