"""The travel environment's realistic mistakes for self-repair demonstrations (``EnvSpec.mistakes``).

Only searches, lookups and bookings that fail go wrong here, so the rest of the reference stays
valid:

- ``sold_out``: the booking of the first option the search listed as sold out (of those listed
  before the reference's, where there are any: cheaper or earlier), refused with the options
  still open named cheapest first; the fix books the reference's option. The commonest natural
  error of a repair-tuned model on travel's held-out split (6 of its first 12 erring episodes,
  stop 57), after which it mostly called ``finish`` as if booked;
- ``wrong_entity``: a city name respelt the way a small model respells one it never wrote
  (its first three letters, then a wrong ending: ``Dubrook``; a flight's origin or destination,
  by task): ``unknown city``, with the close names suggested; the recovery sentence repeats the
  suggestion as the call spells it (``"Dubai"``, ``env.as_written``), so the fix's tokens are
  copied, not respelt;
- ``bad_date``: the date written day-first (``07/12/2026``): the error shows the format;
- ``nearest_template``: another template's first search with this task's entities (a hotel search
  where a flight was asked, or the other way round);
- ``intermediate``: the forecast of the destination instead of the search: a real result that
  books nothing;
- ``extra_args``: a tool that takes no arguments (``list_bookings``) called with the task's
  search's arguments, refused as ``unexpected argument``; the fix calls it with none. What a
  repair-tuned model did on 20 of the 23 held-out ``rebook_hotel`` tasks (stop 60), then searched
  without ever listing or cancelling.
"""

from __future__ import annotations

from collections.abc import Sequence

from trajforge.envs.mistakes import first_call, nearest_template, task_hash, with_args
from trajforge.envs.toolsets import class_toolset
from trajforge.envs.travel.cities import world_cities
from trajforge.envs.travel.env import TravelEnv, as_written, close_cities
from trajforge.schema import Mistake, Task, ToolCall

SEARCHES = ("search_flights", "search_hotels")
READS = (*SEARCHES, "get_weather", "list_bookings")
BOOKINGS = {"book_flight": ("search_flights", "flight_id", "seats"),
            "book_hotel": ("search_hotels", "hotel_id", "rooms")}
"""A booking tool → the search that lists its options, its id argument, what it runs out of."""


def sold_out(task: Task) -> Mistake | None:
    """The first reference booking whose preceding search listed a sold-out option: that option
    booked instead. The reference is replayed in a real environment up to the booking, so the
    listing counts the seats and rooms its earlier bookings took."""
    env = TravelEnv()
    env.reset(task)
    listed: dict[str, str] = {}  # search tool → its last listing
    for at, call in enumerate(task.reference):
        if call.name in BOOKINGS:
            search, key, unit = BOOKINGS[call.name]
            mine = str(call.arguments.get(key, ""))
            lines = listed.get(search, "").splitlines()[1:]  # the header, then one option a line
            ids = [line.split(" | ")[0] for line in lines]
            full = [i for i, line in zip(ids, lines) if line.endswith("| sold out") and i != mine]
            if full and mine in ids:
                before = [i for i in full if ids.index(i) < ids.index(mine)]
                wrong = (before or full)[0]  # the first listed: what a model that skims books
                # The task's reasoning for this booking names the reference's option: said before
                # the wrong one, a model learns to copy it from the mistaken turn (stop 57).
                return Mistake(kind="sold_out", at=at, calls=(with_args(call, **{key: wrong}),),
                               words=f"I'll book {wrong}, the first one the search listed.",
                               recovery=f"{wrong} is sold out, as the search said; I'll book {as_written(mine)}, "
                                        f"which has {unit} left.")
        result = getattr(env, call.name)(**call.arguments)
        if call.name in SEARCHES:
            listed[call.name] = result
    return None


def extra_args(task: Task) -> Mistake | None:
    """The first reference call to a tool that takes no arguments, given the arguments of the
    task's first search (the request's own city, dates and limits, which a model carries over),
    or the request's city and date where the task searches nothing (``cancel_hotel``)."""
    takes = {t.name: t.parameters.get("properties") for t in class_toolset(TravelEnv).tools}
    at = next((i for i, c in enumerate(task.reference) if c.name in takes and not takes[c.name]), None)
    search = next((c for c in task.reference if c.name in SEARCHES), None)
    carried = dict(search.arguments) if search else {k: task.entities[k] for k in ("city", "date")
                                                     if k in task.entities}
    if at is None or not carried:
        return None
    name = task.reference[at].name
    return Mistake(kind="extra_args", at=at, calls=(ToolCall(name=name, arguments=carried),),
                   recovery=f"{name} takes no arguments; I'll call it with none.")


ENDINGS = ("rook", "ro", "berok", "ville", "ton", "ena")
"""Wrong endings after a city's first three letters. A repair-tuned SmolLM2 wrote the held-out
``Dubai`` as ``Dubrook``, ``Dubro`` or ``Dubberok`` in its calls (stop 60), then, taught on
misspellings one letter short (``Shangha`` → ``Shanghai``), wrote the fix by extending its own
misspelling (``Dubberok`` in 11 of 24). A misspelling that parts from the city after three letters
is one the fix cannot be grown from: it has to be copied from the error's suggestion."""


def misspelt(task: Task, city: str) -> str:
    """``city`` with a wrong ending (by task) that the environment still takes for ``city``: not
    another city's name, and ``city`` the first the error suggests. One letter short where no
    ending fits."""
    names = [c.name for c in world_cities(task.world)]
    start = task_hash(task.id)
    for k in range(len(ENDINGS)):
        wrong = city[:3] + ENDINGS[(start + k) % len(ENDINGS)]
        if wrong not in names and not city.startswith(wrong) and close_cities(wrong, names)[:1] == [city]:
            return wrong
    return city[:-1]


def travel_mistakes(task: Task, pool: Sequence[Task]) -> list[Mistake]:
    out: list[Mistake] = [m for m in (sold_out(task), extra_args(task)) if m is not None]
    at = first_call(task, SEARCHES)
    if at is None:  # a task that searches nothing (``cancel_hotel``): only its listing can go wrong
        return out
    call = task.reference[at]
    # Either city of a flight search, by task: demonstrations that only ever misspelt the origin
    # taught a tuned model to write the suggested city into ``origin`` whichever argument the
    # error was about (2 of the 3 fixes that copied "Dubai" right, stop 60).
    keys = [k for k in ("origin", "destination", "city") if k in call.arguments] or ["city"]
    key = keys[task_hash(task.id) % len(keys)]
    city = str(call.arguments.get(key, ""))
    if len(city) > 3:
        wrong = misspelt(task, city)
        # The recovery sentence carries loss: quoting the misspelling there trained the model to
        # write misspellings (a first call spelling the held-out Dubai right in 30 of 64 tasks
        # with one-letter-short misspellings quoted, 2–10 with Dubrook-like ones quoted, stop 61–62).
        out.append(Mistake(kind="wrong_entity", at=at, calls=(with_args(call, **{key: wrong}),),
                           recovery=f"No city is spelt that way; the error suggests {as_written(city)}, "
                                    "the one asked for."))
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
