"""The ``travel`` environment: search and book flights and hotels, check forecasts, then finish.

``env`` (TravelEnv and its tool output formats), ``catalog`` (the seeded world: cities, daily
flights, hotels, weather), ``cities`` (world 0's cities and the pool other worlds draw theirs
from), ``tasks`` (booking templates whose plans run against the catalog and through the tools,
held-out cities, days, templates and tool combinations).
"""

from trajforge._compat import ENV_MODULE_NAMES, moved_names
from trajforge.envs.registry import EnvSpec
from trajforge.envs.travel.mistakes import travel_mistakes
from trajforge.envs.travel.failures import wrong_answer_kind
from trajforge.envs.travel.env import TravelEnv
from trajforge.envs.travel.tasks import generate_compose_tasks, generate_travel_tasks, generator

SPEC = EnvSpec(name="travel", env=TravelEnv, generate=generate_travel_tasks, world_generator=lambda w: generator(0, w),
               summary="book flights and hotels against a seeded catalog of 20 cities",
               wrong_answer=wrong_answer_kind,
               # Close: a search listed an expected item (found_option) or one was booked (booked).
               # Any search with results, a forecast, or finish is reached by nearly every attempt.
               progress=frozenset({"found_option", "booked"}),
               mistakes=travel_mistakes, compose=generate_compose_tasks)

__all__ = ["SPEC", "TravelEnv"]

__getattr__ = moved_names(__name__, {
    **{n: "trajforge.envs.travel.env" for n in ("Booking", "MAX_NAME", "MAX_NIGHTS", "booking_key")},
    **{n: "trajforge.envs.travel.formats" for n in (
        "BookingRow", "FlightRow", "HotelRow", "read_bookings", "read_flights", "read_hotels")},
    **{n: "trajforge.envs.travel.catalog" for n in ("CURRENCY", "Catalog", "City", "Flight", "Hotel", "catalog",
                                                     "day_range")},
    **ENV_MODULE_NAMES})
