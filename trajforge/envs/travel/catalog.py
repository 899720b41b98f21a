"""The travel world: cities, a daily flight schedule, hotels and forecasts, all from one seed.

``catalog(seed, world=0)`` returns an immutable ``Catalog``; its cities are world ``world``'s
(``cities.py``: world 0 is the list below, another world draws from a larger pool). Everything is derived from string-seeded
``random.Random`` instances (sha512 of the string, so independent of ``PYTHONHASHSEED``): the
same seed gives the same flights, prices, rooms and weather on any machine, and a task generated
today still has the same right answer tomorrow.

Shape of the world, chosen to look like a booking site rather than a puzzle:

* 20 cities (Chinese and world), each with its IATA city code, coordinates, a hotel cost level
  and a December climate;
* a *schedule* per route (every ordered city pair): 2-6 daily flights with carrier, number and
  departure time; duration follows great-circle distance;
* *offers* per flight and day: price (distance-based, varying by flight and day) and seats left
  (about one flight in eight is sold out);
* 7 hotels per city (2-5 stars) with a nightly price per date (Friday/Saturday cost more) and
  rooms left per night (some nights sold out);
* one forecast per city and day: sunny, cloudy, rain or snow, with temperatures.

Flights and hotels exist for ``FIRST_DAY`` .. ``FIRST_DAY + DAYS - 1``; prices are in CNY.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass
from datetime import date, timedelta

from trajforge.envs.travel.cities import CARRIERS, CITIES, City, carriers, world_cities  # noqa: F401 - re-exported

FIRST_DAY = date(2026, 12, 1)
DAYS = 28
"""Days the schedule covers, from FIRST_DAY."""
CURRENCY = "CNY"


_HOTEL_WORDS = ("Grand", "Riverside", "Garden", "Central", "Harbour", "Imperial", "Lotus",
                "Skyline", "Orchid", "Palace", "Jade", "Park", "Silk Road", "Lantern")
_HOTEL_KINDS = ("Hotel", "Inn", "Suites", "Residence", "Lodge")
_STARS = (2, 3, 3, 4, 4, 4, 5)
_STAR_PRICE = {2: 200, 3: 350, 4: 600, 5: 1050}
"""Nightly CNY at cost level 1.0, before per-hotel and per-night variation."""


@dataclass(frozen=True)
class ScheduledFlight:
    """A flight that operates every day on one route."""

    number: str
    """Carrier code + digits, e.g. ``CA1375``."""
    carrier: str
    origin: City
    destination: City
    depart_min: int
    """Departure, minutes after midnight."""
    duration_min: int
    base_price: float


@dataclass(frozen=True)
class Flight:
    """One flight on one day, as offered."""

    id: str
    """``NUMBER-MMDD``, e.g. ``CA1375-1203``: unique across the whole catalog."""
    sched: ScheduledFlight
    day: date
    price: int
    seats: int
    """Seats for sale before any booking in the episode."""

    @property
    def depart(self) -> str:
        return clock(self.sched.depart_min)

    @property
    def arrive(self) -> str:
        return clock(self.sched.depart_min + self.sched.duration_min)


@dataclass(frozen=True)
class Hotel:
    id: str
    """``H-<city code>-NN``, e.g. ``H-SHA-03``."""
    name: str
    city: City
    stars: int
    base_price: float


@dataclass(frozen=True)
class Forecast:
    city: City
    day: date
    condition: str
    """sunny, cloudy, rain or snow."""
    low: int
    high: int
    rain_chance: int
    """Percent."""


def clock(minutes: int) -> str:
    """``HH:MM``; a time past midnight gets ``+1`` (arrives the next day)."""
    days, rest = divmod(minutes, 24 * 60)
    text = f"{rest // 60:02d}:{rest % 60:02d}"
    return text + (f"+{days}" if days else "")


def day_range() -> tuple[date, date]:
    return FIRST_DAY, FIRST_DAY + timedelta(days=DAYS - 1)


def _distance_km(a: City, b: City) -> float:
    la, lb = math.radians(a.lat), math.radians(b.lat)
    dlon = math.radians(b.lon - a.lon)
    cos = math.sin(la) * math.sin(lb) + math.cos(la) * math.cos(lb) * math.cos(dlon)
    return 6371.0 * math.acos(max(-1.0, min(1.0, cos)))


class Catalog:
    """The whole travel world for one seed. Immutable: bookings live in the environment."""

    def __init__(self, seed: int = 0, world: int = 0):
        self.seed = seed
        self.world = world
        self.cities = world_cities(world)
        self._by_key = {k.casefold(): c for c in self.cities for k in (c.name, c.code)}
        self.schedule = self._build_schedule()
        self._by_number = {f.number: f for flights in self.schedule.values() for f in flights}
        self.hotels = {c.name: self._build_hotels(c) for c in self.cities}
        self._hotel_by_id = {h.id: h for hs in self.hotels.values() for h in hs}

    def _rng(self, *parts: object) -> random.Random:
        # World 0 keeps the streams it always had; another world's are its own.
        head = (self.seed, f"world{self.world}") if self.world else (self.seed,)
        return random.Random("|".join(map(str, (*head, *parts))))

    # ---- lookups ----------------------------------------------------------------------------

    def city(self, name: str) -> City | None:
        """City by name or IATA code, case-insensitive."""
        return self._by_key.get(" ".join(name.split()).casefold())

    def flights(self, origin: City, destination: City, day: date) -> list[Flight]:
        """Every flight on the route that day, by departure time."""
        return [self._offer(s, day) for s in self.schedule.get((origin.name, destination.name), ())]

    def flight(self, flight_id: str) -> Flight | None:
        number, _, mmdd = flight_id.strip().upper().partition("-")
        sched = self._by_number.get(number)
        if sched is None or len(mmdd) != 4 or not mmdd.isdigit():
            return None
        first, last = day_range()
        for year in range(first.year, last.year + 1):
            try:
                day = date(year, int(mmdd[:2]), int(mmdd[2:]))
            except ValueError:
                return None
            if first <= day <= last:
                return self._offer(sched, day)
        return None

    def hotel(self, hotel_id: str) -> Hotel | None:
        return self._hotel_by_id.get(hotel_id.strip().upper())

    def night(self, hotel: Hotel, day: date) -> tuple[int, int]:
        """(price, rooms for sale) for one night starting ``day``."""
        rng = self._rng("night", hotel.id, day)
        weekend = 1.15 if day.weekday() in (4, 5) else 1.0  # Friday and Saturday nights
        price = int(round(hotel.base_price * weekend * rng.uniform(0.9, 1.1), -1))
        rooms = 0 if rng.random() < 0.1 else rng.randint(1, 12)
        return price, rooms

    def forecast(self, city: City, day: date) -> Forecast:
        rng = self._rng("weather", city.code, day)
        wet = rng.random() < city.rain
        high = round(city.temp + rng.uniform(-4, 4))
        low = high - rng.randint(4, 9)
        if wet:
            condition = "snow" if high <= 1 else "rain"
            chance = rng.randint(60, 95)
        else:
            condition = "sunny" if rng.random() < 0.6 else "cloudy"
            chance = rng.randint(0, 30)
        return Forecast(city, day, condition, low, high, chance)

    # ---- generation -------------------------------------------------------------------------

    def _offer(self, sched: ScheduledFlight, day: date) -> Flight:
        rng = self._rng("offer", sched.number, day)
        price = int(round(sched.base_price * rng.uniform(0.8, 1.3), -1))
        seats = 0 if rng.random() < 0.12 else rng.randint(1, 40)
        return Flight(f"{sched.number}-{day:%m%d}", sched, day, price, seats)

    def _build_schedule(self) -> dict[tuple[str, str], tuple[ScheduledFlight, ...]]:
        used: set[str] = set()
        schedule = {}
        for a in self.cities:
            for b in self.cities:
                if a is b:
                    continue
                rng = self._rng("route", a.code, b.code)
                km = _distance_km(a, b)
                airlines = list(dict.fromkeys(carriers(a.country) + carriers(b.country)))
                count = rng.randint(4, 6) if a.country == b.country else rng.randint(2, 4)
                departs = sorted(rng.sample(range(6 * 12, 22 * 12), count))  # 5-minute slots
                flights = []
                for slot in departs:
                    code, name = rng.choice(airlines)
                    number = f"{code}{rng.randint(100, 9899)}"
                    while number in used:  # flight numbers are unique across routes
                        number = f"{code}{rng.randint(100, 9899)}"
                    used.add(number)
                    flights.append(ScheduledFlight(
                        number=number, carrier=name, origin=a, destination=b,
                        depart_min=slot * 5, duration_min=int(round((35 + km * 0.075) / 5) * 5),
                        base_price=(250 + 0.55 * km) * rng.uniform(0.85, 1.25)))
                schedule[(a.name, b.name)] = tuple(flights)
        return schedule

    def _build_hotels(self, city: City) -> tuple[Hotel, ...]:
        rng = self._rng("hotels", city.code)
        words = rng.sample(_HOTEL_WORDS, len(_STARS))
        stars = list(_STARS)
        rng.shuffle(stars)
        return tuple(
            Hotel(id=f"H-{city.code}-{i + 1:02d}", name=f"{word} {rng.choice(_HOTEL_KINDS)}",
                  city=city, stars=s, base_price=city.cost * _STAR_PRICE[s] * rng.uniform(0.8, 1.3))
            for i, (word, s) in enumerate(zip(words, stars)))


@functools.lru_cache(maxsize=8)
def catalog(seed: int = 0, world: int = 0) -> Catalog:
    """The (immutable, so shareable) catalog for ``seed`` in ``world`` (``cities.world_cities``)."""
    return Catalog(seed, world)
