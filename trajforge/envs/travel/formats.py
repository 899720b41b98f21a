"""Reading the travel tools' output back into rows, as an agent (and the task generator) would.

The formats are the ones ``env.py``'s tools write (its module docstring shows them); the
generator's tool path reads its own searches through these, so a rendering change that breaks
parsing drops tasks as ``verifier_rejected`` instead of producing wrong ones.
"""

from __future__ import annotations

from typing import NamedTuple


class FlightRow(NamedTuple):
    id: str
    carrier: str
    depart: str
    arrive: str
    price: int
    seats: int
    """0 when sold out."""


class HotelRow(NamedTuple):
    id: str
    name: str
    stars: int
    total: int
    rooms: int
    """0 when sold out."""


class BookingRow(NamedTuple):
    id: str
    kind: str
    item: str
    detail: str
    name: str
    status: str


def _rows(text: str, columns: int) -> list[list[str]]:
    """The ``a | b | c`` lines of a tool result (header and notes skipped)."""
    cells = [line.split(" | ") for line in text.splitlines()]
    return [c for c in cells if len(c) == columns]


def _count(cell: str) -> int:
    return 0 if cell == "sold out" else int(cell.split()[0])


def read_flights(text: str) -> list[FlightRow]:
    """Parse ``search_flights`` output."""
    out = []
    for fid, carrier, times, price, seats in _rows(text, 5):
        depart, _, arrive = times.partition("-")
        out.append(FlightRow(fid, carrier, depart, arrive, int(price.split()[0]), _count(seats)))
    return out


def read_hotels(text: str) -> list[HotelRow]:
    """Parse ``search_hotels`` output."""
    return [HotelRow(hid, name, int(stars.split()[0]), int(total.split()[0]), _count(rooms))
            for hid, name, stars, total, rooms in _rows(text, 5)]


def read_bookings(text: str) -> list[BookingRow]:
    """Parse ``list_bookings`` output."""
    out = []
    for bid, what, detail, name, _price, status in _rows(text, 6):
        kind, _, item = what.partition(" ")
        out.append(BookingRow(bid, kind, item, detail, name, status))
    return out


__all__ = ["Booking", "BookingRow", "FlightRow", "HotelRow", "TravelEnv", "booking_key",
           "read_bookings", "read_flights", "read_hotels"]


__all__ = ["BookingRow", "FlightRow", "HotelRow", "read_bookings", "read_flights", "read_hotels"]
