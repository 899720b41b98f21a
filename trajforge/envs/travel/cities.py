"""The travel world's cities: world 0's twenty, and the pool other worlds draw theirs from.

``world_cities(0)`` is ``CITIES``, the catalog every existing task was made on. World ``w`` > 0
takes 20 cities from world 0's seen cities plus ``CITY_POOL`` (real cities with their IATA city
codes, coordinates, a hotel cost level and December climate, and their countries' carriers),
drawn by ``random.Random("travel-world|w")``; its flights, hotels and forecasts then come from
its own random streams (``Catalog``). No world > 0 has a held-out city (``HELDOUT_CITIES``): the
pool is written without them, and ``tests/tasks/test_worlds.py`` checks every world it builds.
Days cannot be renamed (the calendar is the calendar): the held-out days stay held out because
worlds > 0 serve only the train split, which draws seen days.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

HELDOUT_CITIES: tuple[str, ...] = ("Hangzhou", "Xi'an", "Seoul", "Dubai", "Sydney")
"""World 0's held-out cities (``tasks.py`` keeps them out of train and test); in no world > 0."""
CITIES_PER_WORLD = 20


@dataclass(frozen=True)
class City:
    name: str
    code: str
    """IATA city code (BJS, SHA, ...); tools accept it in place of the name."""
    country: str
    lat: float
    lon: float
    cost: float
    """Hotel price level (1.0 = Beijing)."""
    rain: float
    """December probability of a wet day."""
    temp: float
    """December mean daily high, degrees C."""


CITIES: tuple[City, ...] = (
    City("Beijing", "BJS", "China", 39.9, 116.4, 1.0, 0.08, 2),
    City("Shanghai", "SHA", "China", 31.2, 121.5, 1.1, 0.30, 10),
    City("Guangzhou", "CAN", "China", 23.1, 113.3, 0.9, 0.15, 19),
    City("Shenzhen", "SZX", "China", 22.5, 114.1, 1.0, 0.15, 20),
    City("Chengdu", "CTU", "China", 30.7, 104.1, 0.8, 0.25, 10),
    City("Wuhan", "WUH", "China", 30.6, 114.3, 0.75, 0.25, 9),
    City("Nanjing", "NKG", "China", 32.1, 118.8, 0.8, 0.30, 8),
    City("Chongqing", "CKG", "China", 29.6, 106.5, 0.75, 0.35, 11),
    City("Hangzhou", "HGH", "China", 30.3, 120.2, 0.95, 0.35, 10),
    City("Xi'an", "XIY", "China", 34.3, 108.9, 0.75, 0.12, 6),
    City("Tokyo", "TYO", "Japan", 35.7, 139.7, 1.5, 0.20, 12),
    City("Seoul", "SEL", "South Korea", 37.6, 127.0, 1.3, 0.15, 4),
    City("Singapore", "SIN", "Singapore", 1.35, 103.8, 1.6, 0.55, 30),
    City("Bangkok", "BKK", "Thailand", 13.8, 100.5, 0.9, 0.12, 31),
    City("Dubai", "DXB", "United Arab Emirates", 25.3, 55.3, 1.7, 0.06, 24),
    City("London", "LON", "United Kingdom", 51.5, -0.1, 1.9, 0.50, 8),
    City("Paris", "PAR", "France", 48.9, 2.35, 1.8, 0.45, 8),
    City("Frankfurt", "FRA", "Germany", 50.1, 8.7, 1.5, 0.40, 5),
    City("New York", "NYC", "United States", 40.7, -74.0, 2.0, 0.30, 7),
    City("Sydney", "SYD", "Australia", -33.9, 151.2, 1.6, 0.25, 25),
)

CARRIERS: dict[str, tuple[tuple[str, str], ...]] = {
    "China": (("CA", "Air China"), ("MU", "China Eastern"), ("CZ", "China Southern"),
              ("HU", "Hainan Airlines")),
    "Japan": (("NH", "ANA"), ("JL", "Japan Airlines")),
    "South Korea": (("KE", "Korean Air"), ("OZ", "Asiana Airlines")),
    "Singapore": (("SQ", "Singapore Airlines"),),
    "Thailand": (("TG", "Thai Airways"),),
    "United Arab Emirates": (("EK", "Emirates"),),
    "United Kingdom": (("BA", "British Airways"),),
    "France": (("AF", "Air France"),),
    "Germany": (("LH", "Lufthansa"),),
    "United States": (("UA", "United Airlines"),),
    "Australia": (("QF", "Qantas"),),
}


CITY_POOL: tuple[City, ...] = (
    City("Osaka", "OSA", "Japan", 34.7, 135.5, 1.3, 0.20, 12),
    City("Busan", "PUS", "South Korea", 35.2, 129.1, 1.1, 0.15, 9),
    City("Kuala Lumpur", "KUL", "Malaysia", 3.1, 101.7, 0.9, 0.60, 32),
    City("Jakarta", "JKT", "Indonesia", -6.2, 106.8, 0.8, 0.65, 31),
    City("Manila", "MNL", "Philippines", 14.6, 121.0, 0.8, 0.30, 30),
    City("Hanoi", "HAN", "Vietnam", 21.0, 105.8, 0.7, 0.15, 20),
    City("Ho Chi Minh City", "SGN", "Vietnam", 10.8, 106.7, 0.7, 0.25, 32),
    City("Delhi", "DEL", "India", 28.6, 77.2, 0.8, 0.05, 23),
    City("Mumbai", "BOM", "India", 19.1, 72.9, 0.9, 0.03, 32),
    City("Istanbul", "IST", "Turkey", 41.0, 29.0, 1.1, 0.45, 11),
    City("Rome", "ROM", "Italy", 41.9, 12.5, 1.5, 0.35, 13),
    City("Madrid", "MAD", "Spain", 40.4, -3.7, 1.4, 0.25, 11),
    City("Amsterdam", "AMS", "Netherlands", 52.4, 4.9, 1.7, 0.55, 7),
    City("Zurich", "ZRH", "Switzerland", 47.4, 8.5, 2.0, 0.40, 4),
    City("Munich", "MUC", "Germany", 48.1, 11.6, 1.5, 0.35, 4),
    City("Los Angeles", "LAX", "United States", 34.1, -118.2, 1.8, 0.15, 20),
    City("San Francisco", "SFO", "United States", 37.8, -122.4, 1.9, 0.35, 14),
    City("Toronto", "YTO", "Canada", 43.7, -79.4, 1.5, 0.40, 1),
    City("Vancouver", "YVR", "Canada", 49.3, -123.1, 1.5, 0.60, 7),
    City("Melbourne", "MEL", "Australia", -37.8, 145.0, 1.5, 0.25, 24),
    City("Auckland", "AKL", "New Zealand", -36.8, 174.8, 1.4, 0.30, 22),
    City("Doha", "DOH", "Qatar", 25.3, 51.5, 1.6, 0.05, 25),
    City("Cairo", "CAI", "Egypt", 30.0, 31.2, 0.9, 0.05, 21),
    City("Xiamen", "XMN", "China", 24.5, 118.1, 0.85, 0.15, 19),
    City("Kunming", "KMG", "China", 25.0, 102.7, 0.7, 0.05, 16),
    City("Qingdao", "TAO", "China", 36.1, 120.4, 0.8, 0.10, 6),
    City("Harbin", "HRB", "China", 45.8, 126.5, 0.7, 0.15, -12),
    City("Sanya", "SYX", "China", 18.3, 109.5, 1.2, 0.20, 27),
)
"""Cities a world may have besides world 0's seen ones; none is a held-out city of world 0."""

POOL_CARRIERS: dict[str, tuple[tuple[str, str], ...]] = {
    "Malaysia": (("MH", "Malaysia Airlines"),),
    "Indonesia": (("GA", "Garuda Indonesia"),),
    "Philippines": (("PR", "Philippine Airlines"),),
    "Vietnam": (("VN", "Vietnam Airlines"),),
    "India": (("AI", "Air India"),),
    "Turkey": (("TK", "Turkish Airlines"),),
    "Italy": (("AZ", "ITA Airways"),),
    "Spain": (("IB", "Iberia"),),
    "Netherlands": (("KL", "KLM"),),
    "Switzerland": (("LX", "Swiss"),),
    "Canada": (("AC", "Air Canada"),),
    "New Zealand": (("NZ", "Air New Zealand"),),
    "Qatar": (("QR", "Qatar Airways"),),
    "Egypt": (("MS", "EgyptAir"),),
}
"""Carriers of the pool's countries that world 0 has none for."""


def carriers(country: str) -> tuple[tuple[str, str], ...]:
    """(code, name) of the airlines based in ``country``."""
    return CARRIERS.get(country) or POOL_CARRIERS[country]


@functools.lru_cache(maxsize=64)
def world_cities(number: int = 0) -> tuple[City, ...]:
    """World ``number``'s cities (0: ``CITIES``); the same number gives the same cities anywhere."""
    if number < 0:
        raise ValueError(f"a world number is 0 or more, not {number}")
    if number == 0:
        return CITIES
    seen = [c for c in CITIES if c.name not in HELDOUT_CITIES]
    return tuple(random.Random(f"travel-world|{number}").sample(seen + list(CITY_POOL), CITIES_PER_WORLD))


__all__ = ["CARRIERS", "CITIES", "CITY_POOL", "City", "HELDOUT_CITIES", "POOL_CARRIERS", "carriers", "world_cities"]
