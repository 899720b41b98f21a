"""Travel environment: search and book flights and hotels, check the weather, then ``finish``.

The world (cities, daily flights, hotels, forecasts) is ``travel_catalog.catalog(task.seed, task.world)``;
the episode state is what the agent changed: its bookings and the seats/rooms they took. Booking
a flight takes a seat, so a flight with one seat left is sold out for the next booking, and
cancelling gives it back. ``snapshot``/``restore`` cover all of it through ``state_fields``.

A task may start with bookings already made (``task.entities["existing"]``: a list of
``{"kind", "item", "day", "nights", "name"}``), e.g. "cancel my Tuesday flight and ...".

``verify`` compares the *active* bookings with ``task.expected["bookings"]`` as a multiset of
(kind, item, day, nights, name): every right item booked, nothing extra, nothing wrongly
cancelled, and ``finish`` called. The expected bookings were computed by the task generator
from the catalog and cross-checked against an executed reference plan, so "constraints met"
(price cap, departure time, stars, cheapest) is exactly "these items booked".

Tool output formats (``formats.py``: ``read_flights`` / ``read_hotels`` / ``read_bookings`` parse them back)::

    Flights from Beijing to Shanghai on 2026-12-03 (3):
    CA1375-1203 | Air China | 07:35-09:30 | 1130 CNY | 12 seats left
    MU5102-1203 | China Eastern | 11:20-13:15 | 980 CNY | sold out

    Hotels in Shanghai from 2026-12-03 for 2 nights, cheapest first (2):
    H-SHA-03 | Riverside Inn | 3 stars | 760 CNY total | 4 rooms left

    B1 | flight CA1375-1203 | Beijing to Shanghai, 2026-12-03 07:35 | Li Wei | 1130 CNY | active
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from datetime import date, timedelta
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from trajforge.envs.base import Environment, ToolError, Verdict
from trajforge.envs.travel.catalog import (
    CURRENCY,
    Catalog,
    City,
    Flight,
    Hotel,
    catalog,
    day_range,
)
from trajforge.parse.limits import short
from trajforge.schema import Task

Option = TypeVar("Option", Flight, Hotel)
MAX_NIGHTS = 14
MAX_NAME = 60
OPEN_SHOWN = 6
"""At most this many open options are named by a sold-out error (a day has a handful of flights)."""
MISSING, EXTRA = "missing ", "extra "
"""How a verdict's detail names an expected booking that is not there, and one that should not be
(``travel/failures.py`` reads them back)."""


class Booking(BaseModel):
    """One booking in the episode state."""

    id: str
    """``B1``, ``B2``... in booking order."""
    kind: Literal["flight", "hotel"]
    item: str
    """Flight id or hotel id."""
    day: str
    """Flight date or hotel check-in, YYYY-MM-DD."""
    nights: int = 0
    """Hotel nights (0 for flights)."""
    name: str
    """Passenger or guest."""
    price: int
    detail: str
    """Route and time, or hotel name and city, as list_bookings shows it."""
    status: Literal["active", "cancelled"] = "active"

    def key(self) -> tuple[str, str, str, int, str]:
        return booking_key(self.model_dump())


def booking_key(spec: dict[str, Any]) -> tuple[str, str, str, int, str]:
    """What makes two bookings "the same" for verification (names compared loosely)."""
    name = " ".join(str(spec.get("name", "")).split()).casefold()
    return (spec["kind"], str(spec["item"]).upper(), str(spec["day"]), int(spec.get("nights", 0)),
            name)


class TravelEnv(Environment):
    """Book flights and hotels against a seeded travel catalog."""

    name = "travel"
    tool_names = ("search_flights", "book_flight", "search_hotels", "book_hotel", "get_weather",
                  "list_bookings", "cancel_booking", "finish")
    final_tool = "finish"
    state_fields = ("bookings", "taken", "summary", "listed")
    instructions = (
        "You are a travel booking assistant. Use the tools to search, book and cancel flights "
        "and hotels and to check forecasts. Dates are YYYY-MM-DD and prices are in CNY. Book "
        "exactly what the user asks for and nothing else, then call finish with a short summary.")

    def __init__(self, seed: int = 0):
        super().__init__(seed=seed)
        self.world: Catalog = catalog(seed)
        self.bookings: list[Booking] = []
        self.taken: dict[str, int] = {}
        """Seats (by flight id) and rooms (by ``hotel_id@night``) taken by this episode."""
        self.summary: str | None = None
        self.listed: dict[str, list[str]] = {}
        """``flight``/``hotel`` → the ids its last search listed (a sold-out error names the open ones)."""

    # ---- episode lifecycle ------------------------------------------------------------------

    def reset(self, task: Task) -> str:
        super().reset(task)
        self.world = catalog(task.seed, task.world)
        self.bookings, self.taken, self.summary, self.listed = [], {}, None, {}
        for spec in task.entities.get("existing", ()):
            try:
                if spec["kind"] == "flight":
                    self.book_flight(spec["item"], spec["name"])
                else:
                    self.book_hotel(spec["item"], spec["day"], spec["nights"], spec["name"])
            except ToolError as e:  # the task itself is broken: an infrastructure fault
                raise RuntimeError(f"task {task.id}: existing booking {spec} failed: {e}") from None
        self.milestones = []  # setting the stage is not progress
        return ""

    def verify(self) -> Verdict:
        expected = Counter(booking_key(b) for b in self._expected())
        actual = Counter(b.key() for b in self.bookings if b.status == "active")
        missing, extra = expected - actual, actual - expected
        problems = ([f"{MISSING}{_describe(k)}" for k in missing.elements()]
                    + [f"{EXTRA}{_describe(k)}" for k in extra.elements()])
        finished = self.summary is not None
        if not finished:
            problems.append("finish was not called")
        detail = "; ".join(problems) or f"all {sum(expected.values())} bookings match"
        return Verdict(submitted=finished, answer=self.summary,
                       correct=finished and not missing and not extra,
                       milestones=list(self.milestones), detail=detail)

    def expected_outcome(self) -> dict[str, Any]:
        """The ``task.expected`` this episode's end state satisfies (for plan-driven synthesis):
        the active bookings."""
        if self.summary is None:
            raise ToolError("the plan never called finish", kind="no_final_call")
        return {"bookings": [{k: b.model_dump()[k] for k in ("kind", "item", "day", "nights",
                                                               "name")}
                             for b in self.bookings if b.status == "active"]}

    # ---- tools ------------------------------------------------------------------------------

    def search_flights(self, origin: str, destination: str, date: str,
                       max_price: int | None = None) -> str:
        """Search one day's flights on a route, listed by departure time.

        Args:
            origin: Departure city, e.g. Beijing.
            destination: Arrival city, e.g. Shanghai.
            date: Travel date, YYYY-MM-DD.
            max_price: Only list flights costing at most this many CNY.
        """
        a, b = self._city(origin), self._city(destination)
        if a is b:
            raise ToolError(f"origin and destination are both {a.name}", kind="bad_route")
        day = self._day(date)
        flights = self.world.flights(a, b, day)
        if max_price is not None:
            flights = [f for f in flights if f.price <= max_price]
        cap = f" at or under {max_price} {CURRENCY}" if max_price is not None else ""
        if not flights:
            return f"No flights from {a.name} to {b.name} on {day}{cap}."
        self.reach("searched")
        self._note_options({f.id for f in flights})
        self.listed["flight"] = [f.id for f in flights]
        lines = [f"Flights from {a.name} to {b.name} on {day}{cap} ({len(flights)}):"]
        lines += [self._flight_line(f) for f in flights]
        return "\n".join(lines)

    def book_flight(self, flight_id: str, passenger: str) -> str:
        """Book one seat on a flight.

        Args:
            flight_id: Flight id from search_flights, e.g. CA1375-1203.
            passenger: Full name of the passenger.
        """
        flight = self.world.flight(flight_id)
        if flight is None:
            raise ToolError(f"no flight {short(flight_id)}; use an id from search_flights "
                            "(like CA1375-1203)", kind="unknown_flight")
        name = self._name(passenger)
        if self._seats_left(flight) < 1:
            raise ToolError(f"flight {flight.id} is sold out; {self._open_flights(flight)}",
                            kind="sold_out")
        if any(b.status == "active" and b.key() == ("flight", flight.id, str(flight.day), 0,
                                                     name.casefold()) for b in self.bookings):
            raise ToolError(f"{name} already has a seat on {flight.id}", kind="duplicate_booking")
        self.taken[flight.id] = self.taken.get(flight.id, 0) + 1
        s = flight.sched
        booking = self._add("flight", flight.id, str(flight.day), 0, name, flight.price,
                            f"{s.origin.name} to {s.destination.name}, {flight.day} {flight.depart}")
        return (f"Booked {booking.id}: flight {flight.id} {booking.detail}, passenger {name}, "
                f"{flight.price} {CURRENCY}.")

    def search_hotels(self, city: str, check_in: str, nights: int = 1,
                      min_stars: int | None = None) -> str:
        """Search hotels in a city for a stay, cheapest total first.

        Args:
            city: City, e.g. Shanghai.
            check_in: Check-in date, YYYY-MM-DD.
            nights: Number of nights.
            min_stars: Only list hotels with at least this many stars.
        """
        c = self._city(city)
        day = self._day(check_in, "check_in")
        nights = self._nights(day, nights)
        rows = self._stays([h for h in self.world.hotels[c.name]
                            if min_stars is None or h.stars >= min_stars], day, nights)
        stars = f" with at least {min_stars} stars" if min_stars is not None else ""
        if not rows:
            return f"No hotels in {c.name}{stars}."
        self.reach("searched")
        self._note_options({h.id for _, h in rows})
        self.listed["hotel"] = [h.id for _, h in rows]
        lines = [f"Hotels in {c.name}{stars} from {day} for {nights} "
                 f"night{'s' if nights > 1 else ''}, cheapest first ({len(rows)}):"]
        for (total, rooms), h in rows:
            avail = f"{rooms} room{'s' if rooms != 1 else ''} left" if rooms else "sold out"
            lines.append(f"{h.id} | {h.name} | {h.stars} stars | {total} {CURRENCY} total | {avail}")
        return "\n".join(lines)

    def book_hotel(self, hotel_id: str, check_in: str, nights: int, guest: str) -> str:
        """Book one room for a stay.

        Args:
            hotel_id: Hotel id from search_hotels, e.g. H-SHA-03.
            check_in: Check-in date, YYYY-MM-DD.
            nights: Number of nights.
            guest: Full name of the guest.
        """
        hotel = self.world.hotel(hotel_id)
        if hotel is None:
            raise ToolError(f"no hotel {short(hotel_id)}; use an id from search_hotels "
                            "(like H-SHA-03)", kind="unknown_hotel")
        day = self._day(check_in, "check_in")
        nights = self._nights(day, nights)
        name = self._name(guest)
        total, rooms = self._stay(hotel, day, nights)
        if rooms < 1:
            raise ToolError(f"{hotel.name} ({hotel.id}) has no room for all {nights} nights "
                            f"from {day}; {self._open_hotels(hotel, day, nights)}", kind="sold_out")
        for n in range(nights):
            key = _night_key(hotel, day + timedelta(days=n))
            self.taken[key] = self.taken.get(key, 0) + 1
        booking = self._add("hotel", hotel.id, str(day), nights, name, total,
                            f"{hotel.name}, {hotel.city.name}, {day} for {nights} "
                            f"night{'s' if nights > 1 else ''}")
        return f"Booked {booking.id}: {booking.detail}, guest {name}, {total} {CURRENCY}."

    def get_weather(self, city: str, date: str) -> str:
        """Get the weather forecast for a city on one day.

        Args:
            city: City, e.g. Beijing.
            date: Date, YYYY-MM-DD.
        """
        f = self.world.forecast(self._city(city), self._day(date))
        self.reach("checked_weather")
        return (f"Forecast for {f.city.name} on {f.day}: {f.condition}, {f.low} to {f.high} C, "
                f"{f.rain_chance}% chance of precipitation.")

    def list_bookings(self) -> str:
        """List all bookings, including cancelled ones."""
        if not self.bookings:
            return "No bookings."
        return "\n".join(f"{b.id} | {b.kind} {b.item} | {b.detail} | {b.name} | {b.price} "
                         f"{CURRENCY} | {b.status}" for b in self.bookings)

    def cancel_booking(self, booking_id: str) -> str:
        """Cancel a booking and release its seat or room.

        Args:
            booking_id: Booking id from list_bookings, e.g. B1.
        """
        wanted = booking_id.strip().upper()
        booking = next((b for b in self.bookings if b.id == wanted), None)
        if booking is None:
            known = ", ".join(b.id for b in self.bookings) or "none"
            raise ToolError(f"no booking {short(booking_id)}; bookings: {known}",
                            kind="unknown_booking")
        if booking.status == "cancelled":
            raise ToolError(f"booking {booking.id} is already cancelled", kind="already_cancelled")
        for key in self._inventory_keys(booking):
            self.taken[key] -= 1
        booking.status = "cancelled"
        return f"Cancelled {booking.id} ({booking.kind} {booking.item})."

    def finish(self, summary: str) -> str:
        """Finish the request once everything is booked.

        Args:
            summary: One or two sentences on what was booked.
        """
        self.summary = summary
        self.reach("finished")
        return "Done."

    # ---- helpers ----------------------------------------------------------------------------

    def _expected(self) -> list[dict[str, Any]]:
        expected = self.task.expected if self.task else None
        return list(expected.get("bookings", ())) if isinstance(expected, dict) else []

    def _note_options(self, ids: set[str]) -> None:
        if any(b["item"] in ids for b in self._expected()):
            self.reach("found_option")

    def _add(self, kind: Literal["flight", "hotel"], item: str, day: str, nights: int, name: str,
             price: int, detail: str) -> Booking:
        booking = Booking(id=f"B{len(self.bookings) + 1}", kind=kind, item=item, day=day,
                          nights=nights, name=name, price=price, detail=detail)
        self.bookings.append(booking)
        if booking.key() in {booking_key(b) for b in self._expected()}:
            self.reach("booked")
        return booking

    def _inventory_keys(self, booking: Booking) -> list[str]:
        if booking.kind == "flight":
            return [booking.item]
        hotel = self.world.hotel(booking.item)
        start = date.fromisoformat(booking.day)
        return [_night_key(hotel, start + timedelta(days=n)) for n in range(booking.nights)]

    def _seats_left(self, flight: Flight) -> int:
        return flight.seats - self.taken.get(flight.id, 0)

    def _stay(self, hotel: Hotel, day: date, nights: int) -> tuple[int, int]:
        """(total price, rooms free on every night) of a stay."""
        total, rooms = 0, None
        for n in range(nights):
            night = day + timedelta(days=n)
            price, free = self.world.night(hotel, night)
            free -= self.taken.get(_night_key(hotel, night), 0)
            total += price
            rooms = free if rooms is None else min(rooms, free)
        return total, max(rooms or 0, 0)

    # A sold-out error names what is still open, cheapest first as most requests ask, so the fix
    # is in the error itself rather than in a search some turns back: a small model that booked a
    # sold-out option repeated the refused call in 30 of 34 such episodes (stop 57). The options
    # are the last search's (its price cap or star floor kept) when it listed the refused one.
    def _open_flights(self, refused: Flight) -> str:
        s = refused.sched
        flights = self.world.flights(s.origin, s.destination, refused.day)
        flights = self._as_listed("flight", refused.id, flights)
        flights = sorted((f for f in flights if self._seats_left(f) > 0),
                         key=lambda f: (f.price, f.depart, f.id))
        if not flights:
            return "no flight with seats left to suggest"
        shown = ", ".join(f"{as_written(f.id)} ({f.depart}, {f.price} {CURRENCY})" for f in flights[:OPEN_SHOWN])
        return f"flights with seats left, cheapest first: {shown}"

    def _open_hotels(self, refused: Hotel, day: date, nights: int) -> str:
        hotels = self._as_listed("hotel", refused.id, self.world.hotels[refused.city.name])
        rows = [(total, h) for (total, rooms), h in self._stays(hotels, day, nights) if rooms > 0]
        if not rows:
            return "no hotel with rooms for that stay to suggest"
        shown = ", ".join(f"{as_written(h.id)} ({h.stars} stars, {total} {CURRENCY})" for total, h in rows[:OPEN_SHOWN])
        return f"hotels with rooms for that stay, cheapest first: {shown}"

    def _as_listed(self, kind: str, refused: str, options: list[Option]) -> list[Option]:
        """``options`` narrowed to the last search's listing, where that listing had ``refused``."""
        listed = self.listed.get(kind, [])
        return [o for o in options if o.id in listed] if refused in listed else options

    def _stays(self, hotels: list[Hotel], day: date, nights: int) -> list[tuple[tuple[int, int], Hotel]]:
        """((total, rooms), hotel) for a stay at each hotel, cheapest total first."""
        return sorted(((self._stay(h, day, nights), h) for h in hotels), key=lambda r: (r[0][0], r[1].id))

    def _flight_line(self, f: Flight) -> str:
        left = self._seats_left(f)
        avail = f"{left} seat{'s' if left != 1 else ''} left" if left > 0 else "sold out"
        return f"{f.id} | {f.sched.carrier} | {f.depart}-{f.arrive} | {f.price} {CURRENCY} | {avail}"

    def _city(self, name: str) -> City:
        city = self.world.city(name)
        if city is None:
            names = [c.name for c in self.world.cities]
            close = close_cities(name, names)
            guess = f"did you mean {' or '.join(map(as_written, close))}? " if close else ""
            raise ToolError(f"unknown city {short(name)}; {guess}cities: "
                            f"{', '.join(map(as_written, names))}",
                            kind="unknown_city")
        return city

    def _day(self, text: str, what: str = "date") -> date:
        try:
            day = date.fromisoformat(text.strip()) if _ISO_DAY.fullmatch(text.strip()) else None
        except ValueError:
            day = None
        if day is None:
            raise ToolError(f"{what} must be a date as YYYY-MM-DD (like 2026-12-03), got "
                            f"{short(text)}", kind="bad_date")
        first, last = day_range()
        if not first <= day <= last:
            raise ToolError(f"{day} is outside the bookable period {first} to {last}",
                            kind="bad_date")
        return day

    def _nights(self, day: date, nights: int) -> int:
        if not 1 <= nights <= MAX_NIGHTS:
            raise ToolError(f"nights must be between 1 and {MAX_NIGHTS}, got {nights}",
                            kind="bad_nights")
        last_night = day_range()[1]
        if day + timedelta(days=nights - 1) > last_night:
            raise ToolError(f"a stay must end by {last_night + timedelta(days=1)} (check-out)",
                            kind="bad_date")
        return nights

    def _name(self, name: str) -> str:
        clean = " ".join(name.split())
        if not clean or len(clean) > MAX_NAME:
            raise ToolError(f"a name must be 1-{MAX_NAME} characters, got {short(name)}",
                            kind="bad_name")
        return clean


_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _night_key(hotel: Hotel, night: date) -> str:
    return f"{hotel.id}@{night}"


def _describe(key: tuple[str, str, str, int, str]) -> str:
    kind, item, day, nights, name = key
    stay = f" for {nights} nights" if kind == "hotel" else ""
    return f"{kind} {item} on {day}{stay} for {name}"


def as_written(value: str) -> str:
    """``value`` as a call's JSON argument spells it (``"Dubai"``), for the names an error offers
    as the fix. A small model copies tokens it can see far more reliably than it respells a
    word: in prose ` Dubai` is one token of SmolLM2's vocabulary, in a JSON string it is `D` `ub`
    `ai`, and the tuned 135M model went on from `D` `ub` with `ro` `ok` (``Dubrook``) in most of
    its calls naming that held-out city, then again after an error that suggested ` Dubai`, 0 of
    45 recovering (stops 58-59). The refused value stays in ``short``'s single quotes, so the
    error never offers the wrong spelling in the form a call would copy."""
    return json.dumps(value, ensure_ascii=False)


def close_cities(name: str, names: list[str]) -> list[str]:
    """The cities a misspelt ``name`` most likely means: difflib's close matches, else those that
    share its first three letters (``Dubrook`` → Dubai: 0.5 similar, under difflib's cutoff, and
    the held-out city a tuned model misspelt 86 times in stop 57)."""
    # City names are short: a model-written megabyte is cut before difflib compares it.
    text = " ".join(name[:60].split()).title()
    close = difflib.get_close_matches(text, names, n=2, cutoff=0.6)
    if close or len(text) < 3:
        return close
    return [n for n in names if n[:3].casefold() == text[:3].casefold()][:2]
