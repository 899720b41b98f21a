"""Travel plans: each template's plan, written once and run two ways (``tasks.py`` says why).

``CatalogView`` runs a plan against the catalog itself (what ends up booked is the task's expected
outcome); ``ToolView`` runs it through the environment's tools, reading the rendered output back
like an agent would (the calls become the reference, the sentences the expert's words). A plan
raises ``Drop(reason)`` when the instance makes no good task (no option fits, a tie for cheapest,
a branch whose two sides book the same thing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from trajforge.envs.travel.catalog import Catalog
from trajforge.envs.travel.formats import BookingRow, FlightRow, HotelRow, read_bookings, read_flights, read_hotels
from trajforge.tasks.templates import Drop, Recorder


# ---- the two ways a plan sees the world -----------------------------------------------------

class ToolView(Recorder):
    """Runs a plan through the environment's tools, recording calls and sentences."""

    def _run(self, why: str, name: str, **arguments: Any) -> str:
        return self.do(why, name, **arguments)

    def flights(self, why: str, origin: str, destination: str, day: str,
                max_price: int | None = None) -> list[FlightRow]:
        args = {"max_price": max_price} if max_price is not None else {}
        return read_flights(self._run(why, "search_flights", origin=origin,
                                      destination=destination, date=day, **args))

    def hotels(self, why: str, city: str, day: str, nights: int,
               min_stars: int | None = None) -> list[HotelRow]:
        args = {"min_stars": min_stars} if min_stars is not None else {}
        return read_hotels(self._run(why, "search_hotels", city=city, check_in=day, nights=nights,
                                     **args))

    def weather(self, why: str, city: str, day: str) -> str:
        text = self._run(why, "get_weather", city=city, date=day)
        return text.split(": ", 1)[1].split(",", 1)[0]

    def bookings(self, why: str) -> list[BookingRow]:
        return read_bookings(self._run(why, "list_bookings"))

    def book_flight(self, why: str, flight_id: str, name: str) -> None:
        self._run(why, "book_flight", flight_id=flight_id, passenger=name)

    def book_hotel(self, why: str, hotel_id: str, day: str, nights: int, name: str) -> None:
        self._run(why, "book_hotel", hotel_id=hotel_id, check_in=day, nights=nights, guest=name)

    def cancel(self, why: str, booking_id: str) -> None:
        self._run(why, "cancel_booking", booking_id=booking_id)

    def finish(self, why: str, summary: str) -> None:
        self._run(why, "finish", summary=summary)


class CatalogView:
    """Runs a plan against the catalog itself; what ends up booked is the expected outcome."""

    def __init__(self, world: Catalog, existing: list[dict[str, Any]]):
        self.world = world
        self.taken: Counter[str] = Counter()
        self.booked: list[dict[str, Any]] = []
        self.status: list[str] = []
        for spec in existing:
            self._book(dict(spec))

    def _book(self, spec: dict[str, Any]) -> None:
        for key in self._keys(spec):
            self.taken[key] += 1
        self.booked.append(spec)
        self.status.append("active")

    def _keys(self, spec: dict[str, Any]) -> list[str]:
        if spec["kind"] == "flight":
            return [spec["item"]]
        start = date.fromisoformat(spec["day"])
        return [f"{spec['item']}@{start + timedelta(days=n)}" for n in range(spec["nights"])]

    def flights(self, why: str, origin: str, destination: str, day: str,
                max_price: int | None = None) -> list[FlightRow]:
        found = self.world.flights(self.world.city(origin), self.world.city(destination),
                                   date.fromisoformat(day))
        return [FlightRow(f.id, f.sched.carrier, f.depart, f.arrive, f.price,
                          f.seats - self.taken[f.id])
                for f in found if max_price is None or f.price <= max_price]

    def hotels(self, why: str, city: str, day: str, nights: int,
               min_stars: int | None = None) -> list[HotelRow]:
        start = date.fromisoformat(day)
        rows = []
        for h in self.world.hotels[self.world.city(city).name]:
            if min_stars is not None and h.stars < min_stars:
                continue
            nights_ = [self.world.night(h, start + timedelta(days=n)) for n in range(nights)]
            rooms = min(free - self.taken[f"{h.id}@{start + timedelta(days=n)}"]
                        for n, (_, free) in enumerate(nights_))
            rows.append(HotelRow(h.id, h.name, h.stars, sum(p for p, _ in nights_), max(rooms, 0)))
        return sorted(rows, key=lambda r: (r.total, r.id))

    def weather(self, why: str, city: str, day: str) -> str:
        return self.world.forecast(self.world.city(city), date.fromisoformat(day)).condition

    def bookings(self, why: str) -> list[BookingRow]:
        return [BookingRow(f"B{i + 1}", b["kind"], b["item"], "", b["name"], self.status[i])
                for i, b in enumerate(self.booked)]

    def book_flight(self, why: str, flight_id: str, name: str) -> None:
        f = self.world.flight(flight_id)
        self._book({"kind": "flight", "item": f.id, "day": str(f.day), "nights": 0, "name": name})

    def book_hotel(self, why: str, hotel_id: str, day: str, nights: int, name: str) -> None:
        self._book({"kind": "hotel", "item": hotel_id, "day": day, "nights": nights, "name": name})

    def cancel(self, why: str, booking_id: str) -> None:
        i = int(booking_id[1:]) - 1
        self.status[i] = "cancelled"
        for key in self._keys(self.booked[i]):
            self.taken[key] -= 1

    def finish(self, why: str, summary: str) -> None:
        pass

    def active(self) -> list[dict[str, Any]]:
        return [b for b, s in zip(self.booked, self.status) if s == "active"]


View = ToolView | CatalogView


# ---- choosing ---------------------------------------------------------------------------------

def cheapest_flight(rows: list[FlightRow]) -> FlightRow:
    """The cheapest flight with a seat; ``Drop`` when none, or when two share the lowest price."""
    return _unique_best([r for r in rows if r.seats > 0], key=lambda r: r.price)


def cheapest_hotel(rows: list[HotelRow]) -> HotelRow:
    return _unique_best([r for r in rows if r.rooms > 0], key=lambda r: r.total)


def _unique_best(rows: list, key: Callable[[Any], Any]) -> Any:
    if not rows:
        raise Drop("no_option")
    ranked = sorted(rows, key=key)
    if len(ranked) > 1 and key(ranked[0]) == key(ranked[1]):
        raise Drop("tie")
    return ranked[0]


def _available(rows: list[FlightRow]) -> list[FlightRow]:
    available = [r for r in rows if r.seats > 0]
    if not available:
        raise Drop("no_option")
    return available


# ---- plans ------------------------------------------------------------------------------------
# Each plan is written once and run through both views. ``e`` holds the template's entities.

def _book_cheapest_flight(v: View, e: dict[str, Any], origin: str, destination: str, day: str
                          ) -> FlightRow:
    rows = v.flights(f"I'll look up the flights from {origin} to {destination} on {day}.",
                     origin, destination, day)
    best = cheapest_flight(rows)
    v.book_flight(f"{best.id} is the cheapest flight with seats ({best.price} CNY), so I'll book "
                  f"it for {e['passenger']}.", best.id, e["passenger"])
    return best


def _book_cheapest_hotel(v: View, e: dict[str, Any], city: str, day: str, nights: int,
                         min_stars: int | None) -> HotelRow:
    stars = f" with at least {min_stars} stars" if min_stars else ""
    rows = v.hotels(f"I'll search hotels in {city}{stars} from {day} for {nights} nights.",
                    city, day, nights, min_stars)
    best = cheapest_hotel(rows)
    v.book_hotel(f"{best.name} ({best.id}) is the cheapest{stars} with a room, {best.total} CNY; "
                 f"I'll book it for {e['passenger']}.", best.id, day, nights, e["passenger"])
    return best


def plan_cheapest_flight(v: View, e: dict[str, Any]) -> None:
    best = _book_cheapest_flight(v, e, e["origin"], e["destination"], e["date"])
    v.finish("The flight is booked, so I'm done.",
             f"Booked {best.id} from {e['origin']} to {e['destination']} on {e['date']} for "
             f"{e['passenger']}, {best.price} CNY.")


def plan_flight_before_under(v: View, e: dict[str, Any]) -> None:
    rows = v.flights(f"I'll search flights from {e['origin']} to {e['destination']} on "
                     f"{e['date']} costing at most {e['max_price']} CNY.",
                     e["origin"], e["destination"], e["date"], e["max_price"])
    best = cheapest_flight([r for r in rows if r.depart < e["before"]])
    v.book_flight(f"Of those leaving before {e['before']}, {best.id} at {best.depart} is the "
                  f"cheapest with seats, so I'll book it.", best.id, e["passenger"])
    v.finish("The flight is booked.", f"Booked {best.id} (departs {best.depart}, {best.price} CNY)"
             f" for {e['passenger']}.")


def plan_latest_before(v: View, e: dict[str, Any]) -> None:
    rows = v.flights(f"I'll list the flights from {e['origin']} to {e['destination']} on "
                     f"{e['date']}.", e["origin"], e["destination"], e["date"])
    early = [r for r in _available(rows) if r.depart < e["before"]]
    if not early:
        raise Drop("no_option")
    best = max(early, key=lambda r: r.depart)
    v.book_flight(f"The latest flight with seats leaving before {e['before']} is {best.id} at "
                  f"{best.depart}; I'll book it.", best.id, e["passenger"])
    v.finish("The flight is booked.", f"Booked {best.id} at {best.depart} for {e['passenger']}.")


def plan_latest_flight(v: View, e: dict[str, Any]) -> None:
    rows = v.flights(f"I'll list the flights from {e['origin']} to {e['destination']} on "
                     f"{e['date']}.", e["origin"], e["destination"], e["date"])
    best = max(_available(rows), key=lambda r: r.depart)
    v.book_flight(f"The latest flight with seats is {best.id} at {best.depart}; I'll book it.",
                  best.id, e["passenger"])
    v.finish("The flight is booked.", f"Booked {best.id} at {best.depart} for {e['passenger']}.")


def plan_hotel_stars(v: View, e: dict[str, Any]) -> None:
    stars = e["stars"]
    rows = v.hotels(f"I'll search hotels in {e['city']} with at least {stars} stars from "
                    f"{e['date']} for {e['nights']} nights.", e["city"], e["date"], e["nights"],
                    stars)
    best = cheapest_hotel([r for r in rows if r.stars == stars])
    v.book_hotel(f"The cheapest {stars}-star hotel with a room is {best.name} ({best.id}) at "
                 f"{best.total} CNY, so I'll book it.", best.id, e["date"], e["nights"],
                 e["passenger"])
    v.finish("The hotel is booked.", f"Booked {best.name} in {e['city']} for {e['nights']} nights "
             f"from {e['date']} for {e['passenger']}.")


def plan_trip(v: View, e: dict[str, Any]) -> None:
    flight = _book_cheapest_flight(v, e, e["origin"], e["destination"], e["date"])
    hotel = _book_cheapest_hotel(v, e, e["destination"], e["date"], e["nights"], e["stars"])
    v.finish("Both the flight and the hotel are booked.",
             f"Booked flight {flight.id} and {hotel.name} in {e['destination']} for "
             f"{e['passenger']}.")


def plan_round_trip(v: View, e: dict[str, Any]) -> None:
    out = _book_cheapest_flight(v, e, e["origin"], e["destination"], e["date"])
    back = _book_cheapest_flight(v, e, e["destination"], e["origin"], e["date2"])
    v.finish("Both legs are booked.", f"Booked {out.id} out and {back.id} back for "
             f"{e['passenger']}.")


def plan_multi_leg(v: View, e: dict[str, Any]) -> None:
    nights = (date.fromisoformat(e["date2"]) - date.fromisoformat(e["date"])).days
    first = _book_cheapest_flight(v, e, e["origin"], e["via"], e["date"])
    hotel = _book_cheapest_hotel(v, e, e["via"], e["date"], nights, e["stars"])
    second = _book_cheapest_flight(v, e, e["via"], e["destination"], e["date2"])
    v.finish("All three bookings are made.",
             f"Booked {first.id}, {hotel.name} in {e['via']} for {nights} nights, and "
             f"{second.id} for {e['passenger']}.")


def _cancel_existing(v: View, e: dict[str, Any], kind: str, item: str, what: str) -> None:
    rows = v.bookings("First I'll list the current bookings.")
    match = [r for r in rows if r.kind == kind and r.item == item and r.status == "active"]
    if len(match) != 1:
        raise Drop("reference_error")
    v.cancel(f"{match[0].id} is the {what}, so I'll cancel it.", match[0].id)


def plan_rebook_flight(v: View, e: dict[str, Any]) -> None:
    old = e["existing"][0]["item"]
    _cancel_existing(v, e, "flight", old, f"flight from {e['origin']} to {e['destination']} on "
                     f"{e['date']}")
    best = _book_cheapest_flight(v, e, e["origin"], e["destination"], e["date2"])
    v.finish("The flight is rebooked and the other bookings are kept.",
             f"Cancelled {old} and booked {best.id} on {e['date2']} for {e['passenger']}.")


def plan_cancel_hotel(v: View, e: dict[str, Any]) -> None:
    old = e["existing"][0]["item"]
    _cancel_existing(v, e, "hotel", old, f"hotel booking in {e['city']}")
    v.finish("The hotel booking is cancelled and the other bookings are kept.",
             f"Cancelled {old} for {e['passenger']}.")


def plan_hotel_any(v: View, e: dict[str, Any]) -> None:
    best = _book_cheapest_hotel(v, e, e["city"], e["date"], e["nights"], None)
    v.finish("The hotel is booked.", f"Booked {best.name} in {e['city']} for {e['nights']} nights "
             f"from {e['date']} for {e['passenger']}.")


def plan_rebook_hotel(v: View, e: dict[str, Any]) -> None:
    old = e["existing"][0]["item"]
    _cancel_existing(v, e, "hotel", old, f"hotel booking in {e['city']}")
    best = _book_cheapest_hotel(v, e, e["city"], e["date"], e["nights"], e["stars"])
    if best.id == old:
        raise Drop("already_booked")
    v.finish("The hotel is changed and the other bookings are kept.",
             f"Cancelled {old} and booked {best.name} for {e['passenger']}.")


def _forecast(v: View, city: str, day: str) -> bool:
    """Check the weather; True when rain is forecast (snow is neither answer, so it's dropped)."""
    condition = v.weather(f"First I'll check the forecast for {city} on {day}.", city, day)
    if condition == "snow":
        raise Drop("ambiguous_weather")
    return condition == "rain"


def plan_weather_flight(v: View, e: dict[str, Any]) -> None:
    rain = _forecast(v, e["destination"], e["date"])
    rows = v.flights(f"{'Rain' if rain else 'No rain'} is forecast, so I need the "
                     f"{'earliest' if rain else 'cheapest'} flight; let me search.",
                     e["origin"], e["destination"], e["date"])
    earliest = min(_available(rows), key=lambda r: r.depart)
    cheapest = cheapest_flight(rows)
    if earliest.id == cheapest.id:
        raise Drop("branch_indistinct")  # both branches book the same flight: tests nothing
    best = earliest if rain else cheapest
    v.book_flight(f"{best.id} is the {'earliest' if rain else 'cheapest'} flight with seats, so "
                  f"I'll book it.", best.id, e["passenger"])
    v.finish("The flight is booked.", f"{'Rain' if rain else 'No rain'} in {e['destination']}; "
             f"booked {best.id} for {e['passenger']}.")


def plan_weather_hotel(v: View, e: dict[str, Any]) -> None:
    rain = _forecast(v, e["city"], e["date"])
    want = f"with at least {e['stars']} stars" if rain else "of any rating"
    rows = v.hotels(f"{'Rain' if rain else 'No rain'} is forecast, so I need the cheapest hotel "
                    f"{want}; I'll list the hotels in {e['city']}.", e["city"], e["date"],
                    e["nights"])
    starred = cheapest_hotel([r for r in rows if r.stars >= e["stars"]])
    anything = cheapest_hotel(rows)
    if starred.id == anything.id:
        raise Drop("branch_indistinct")
    best = starred if rain else anything
    v.book_hotel(f"The cheapest hotel {want} with a room is {best.name} ({best.id}) at "
                 f"{best.total} CNY, so I'll book it.", best.id, e["date"], e["nights"],
                 e["passenger"])
    v.finish("The hotel is booked.", f"{'Rain' if rain else 'No rain'} in {e['city']}; booked "
             f"{best.name} for {e['passenger']}.")
