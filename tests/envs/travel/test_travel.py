"""TravelEnv: seeded catalog, tools and their errors, booking state, snapshot/restore, verify."""

from __future__ import annotations

import pytest

from trajforge.envs import env_class, make_env
from trajforge.envs.base import ToolError
from trajforge.envs.travel.env import TravelEnv
from trajforge.envs.travel.formats import read_bookings, read_flights, read_hotels
from trajforge.envs.travel.catalog import CITIES, Catalog, catalog, day_range
from trajforge.schema import Task, ToolCall


def task(expected=None, entities=None, seed=0) -> Task:
    return Task(id="t", env="travel", prompt="p", tier="easy", split="train", template="x",
                reference=(), expected=expected, entities=entities or {}, seed=seed)


def fresh(expected=None, entities=None) -> TravelEnv:
    env = make_env("travel")
    env.reset(task(expected, entities))
    return env


def find_flight(world: Catalog, pred):
    """The first flight (Beijing routes first) satisfying ``pred``."""
    first, _ = day_range()
    for a, b in world.schedule:
        for f in world.flights(world.city(a), world.city(b), first):
            if pred(f):
                return f
    raise AssertionError("no such flight in the catalog")


def test_catalog_is_deterministic_per_seed_and_spans_china_and_the_world():
    a, b, other = Catalog(0), Catalog(0), Catalog(1)
    day = day_range()[0]
    bj, sh = a.city("Beijing"), a.city("sha")  # names and IATA codes, any case
    assert [f.id for f in a.flights(bj, sh, day)] == [f.id for f in b.flights(bj, sh, day)]
    assert [(f.price, f.seats) for f in a.flights(bj, sh, day)] == \
        [(f.price, f.seats) for f in b.flights(bj, sh, day)]
    assert [f.price for f in a.flights(bj, sh, day)] != [f.price for f in other.flights(bj, sh, day)]
    countries = {c.country for c in CITIES}
    assert "China" in countries and len(countries) >= 8
    assert {"Beijing", "Shanghai", "Tokyo", "London", "New York"} <= {c.name for c in CITIES}
    numbers = [f.number for flights in a.schedule.values() for f in flights]
    assert len(numbers) == len(set(numbers))  # flight ids are unambiguous
    f = a.flights(bj, sh, day)[0]
    assert a.flight(f.id) == f and a.flight(f.id.lower()) == f
    assert a.flight("ZZ999-1203") is None and a.flight(f.id.split("-")[0] + "-1399") is None


def test_search_book_list_cancel_round_trip():
    env = fresh()
    out = env.execute(ToolCall(name="search_flights", arguments={
        "origin": "Beijing", "destination": "Shanghai", "date": "2026-12-03"}))
    assert out.ok and out.content.startswith("Flights from Beijing to Shanghai on 2026-12-03")
    rows = read_flights(out.content)
    truth = env.world.flights(env.world.city("Beijing"), env.world.city("Shanghai"),
                              day_range()[0].replace(day=3))
    assert [(r.id, r.price, r.seats) for r in rows] == [(f.id, f.price, f.seats) for f in truth]
    assert [r.depart for r in rows] == sorted(r.depart for r in rows)
    pick = next(r for r in rows if r.seats > 0)
    booked = env.execute(ToolCall(name="book_flight", arguments={"flight_id": pick.id,
                                                                 "passenger": " Li  Wei "}))
    assert booked.ok and "Booked B1" in booked.content and "Li Wei" in booked.content
    again = read_flights(env.search_flights("Beijing", "Shanghai", "2026-12-03"))
    assert next(r for r in again if r.id == pick.id).seats == pick.seats - 1
    [b] = read_bookings(env.list_bookings())
    assert (b.id, b.kind, b.item, b.name, b.status) == ("B1", "flight", pick.id, "Li Wei", "active")
    assert env.execute(ToolCall(name="cancel_booking", arguments={"booking_id": "b1"})).ok
    assert read_bookings(env.list_bookings())[0].status == "cancelled"
    back = read_flights(env.search_flights("Beijing", "Shanghai", "2026-12-03"))
    assert next(r for r in back if r.id == pick.id).seats == pick.seats  # seat released


def test_filters_and_hotel_stay_pricing():
    env = fresh()
    cap = read_flights(env.search_flights("Shanghai", "Tokyo", "2026-12-05", max_price=2500))
    assert all(r.price <= 2500 for r in cap)
    rows = read_hotels(env.search_hotels("Shanghai", "2026-12-04", nights=2, min_stars=4))
    assert rows and all(r.stars >= 4 for r in rows)
    assert [r.total for r in rows] == sorted(r.total for r in rows)
    hotel = env.world.hotel(rows[0].id)
    nights = [env.world.night(hotel, day_range()[0].replace(day=d)) for d in (4, 5)]
    assert rows[0].total == sum(p for p, _ in nights)
    assert rows[0].rooms == min(r for _, r in nights)
    forecast = env.get_weather("Beijing", "2026-12-10")
    assert forecast.startswith("Forecast for Beijing on 2026-12-10: ")
    assert "checked_weather" in env.milestones


@pytest.mark.parametrize("call, kind, words", [
    (("search_flights", {"origin": "Pekin", "destination": "Shanghai", "date": "2026-12-03"}),
     "unknown_city", "Beijing"),
    (("search_flights", {"origin": "Beijing", "destination": "BJS", "date": "2026-12-03"}),
     "bad_route", "both Beijing"),
    (("search_flights", {"origin": "Beijing", "destination": "Shanghai", "date": "12/03/2026"}),
     "bad_date", "YYYY-MM-DD"),
    (("search_flights", {"origin": "Beijing", "destination": "Shanghai", "date": "2026-02-30"}),
     "bad_date", "YYYY-MM-DD"),
    (("get_weather", {"city": "Beijing", "date": "2027-01-05"}), "bad_date", "outside"),
    (("book_flight", {"flight_id": "XX1-1203", "passenger": "Li Wei"}), "unknown_flight",
     "search_flights"),
    (("book_flight", {"flight_id": "CA1-1203", "passenger": "  "}), "unknown_flight", "no flight"),
    (("book_hotel", {"hotel_id": "H-SHA-99", "check_in": "2026-12-03", "nights": 1,
                     "guest": "Li Wei"}), "unknown_hotel", "search_hotels"),
    (("book_hotel", {"hotel_id": "H-SHA-01", "check_in": "2026-12-03", "nights": 0,
                     "guest": "Li Wei"}), "bad_nights", "between 1"),
    (("book_hotel", {"hotel_id": "H-SHA-01", "check_in": "2026-12-27", "nights": 5,
                     "guest": "Li Wei"}), "bad_date", "check-out"),
    (("cancel_booking", {"booking_id": "B7"}), "unknown_booking", "bookings: none"),
])
def test_model_mistakes_are_tool_errors_naming_the_problem(call, kind, words):
    env = fresh()
    name, args = call
    result = env.execute(ToolCall(name=name, arguments=args))
    assert not result.ok and not result.fault and result.error == kind
    assert words in result.content and not env.bookings


def test_sold_out_flight_and_last_seat():
    world = catalog(0)
    sold = find_flight(world, lambda f: f.seats == 0)
    last = find_flight(world, lambda f: f.seats == 1)
    env = fresh()
    result = env.execute(ToolCall(name="book_flight", arguments={"flight_id": sold.id,
                                                                 "passenger": "A B"}))
    assert result.error == "sold_out" and "sold out" in result.content
    assert env.execute(ToolCall(name="book_flight", arguments={"flight_id": last.id,
                                                               "passenger": "A B"})).ok
    dup = env.execute(ToolCall(name="book_flight", arguments={"flight_id": last.id,
                                                              "passenger": "C D"}))
    assert dup.error == "sold_out"  # the episode took the last seat
    env.cancel_booking("B1")
    with pytest.raises(ToolError, match="already cancelled"):
        env.cancel_booking("B1")
    assert env.execute(ToolCall(name="book_flight", arguments={"flight_id": last.id,
                                                               "passenger": "C D"})).ok


def test_snapshot_restore_covers_bookings_and_inventory():
    env = fresh()
    fid = next(r.id for r in read_flights(env.search_flights("Beijing", "Chengdu", "2026-12-02"))
               if r.seats > 1)
    env.book_flight(fid, "Li Wei")
    snap = env.snapshot()
    env.book_flight(fid, "Wang Fang")
    env.cancel_booking("B1")
    env.finish("done")
    assert env.done is False  # only execute() sets done
    env.restore(snap)
    assert [(b.id, b.status) for b in env.bookings] == [("B1", "active")]
    assert env.taken == {fid: 1} and env.summary is None and "finished" not in env.milestones
    env.cancel_booking("B1")  # mutating after restore leaves the snapshot intact
    env.restore(snap)
    assert env.bookings[0].status == "active" and env.taken == {fid: 1}


def test_verify_demands_exact_bookings_and_finish():
    env = fresh()
    fid = next(r.id for r in read_flights(env.search_flights("Beijing", "Shanghai", "2026-12-03"))
               if r.seats > 1)
    expected = {"bookings": [{"kind": "flight", "item": fid, "day": "2026-12-03", "nights": 0,
                              "name": "Li Wei"}]}
    env = fresh(expected)
    env.search_flights("Beijing", "Shanghai", "2026-12-03")
    env.book_flight(fid, "li wei")
    v = env.verify()
    assert not v.correct and "finish was not called" in v.detail
    assert env.execute(ToolCall(name="finish", arguments={"summary": "Booked."})).ok and env.done
    v = env.verify()
    assert v.correct and v.submitted and v.answer == "Booked."
    assert v.milestones == ["searched", "found_option", "booked", "finished"]
    env.book_flight(fid, "Wang Fang")
    v = env.verify()
    assert not v.correct and "extra flight" in v.detail
    env.cancel_booking("B2")
    env.cancel_booking("B1")
    v = env.verify()
    assert not v.correct and "missing flight" in v.detail


def test_existing_bookings_are_set_up_at_reset():
    world = catalog(0)
    f = find_flight(world, lambda f: f.seats > 3)
    env = fresh(entities={"existing": [{"kind": "flight", "item": f.id, "day": str(f.day),
                                        "nights": 0, "name": "Li Wei"}]})
    [b] = read_bookings(env.list_bookings())
    assert b.item == f.id and b.status == "active" and env.taken == {f.id: 1}
    assert env.milestones == []  # setting the stage is not progress
    sold = find_flight(world, lambda f: f.seats == 0)
    with pytest.raises(RuntimeError, match="existing booking"):
        fresh(entities={"existing": [{"kind": "flight", "item": sold.id, "name": "X Y"}]})


def test_toolset_is_derived_from_the_tool_methods():
    ts = env_class("travel").toolset()
    assert ts.names == list(TravelEnv.tool_names)
    search = ts.get("search_flights").parameters
    assert search["required"] == ["origin", "destination", "date"]
    assert search["properties"]["max_price"] == {
        "type": "integer", "description": "Only list flights costing at most this many CNY."}
    assert ts.get("list_bookings").parameters["properties"] == {}
