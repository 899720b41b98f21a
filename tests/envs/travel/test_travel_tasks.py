"""Travel task generation: executed+verified references, tiers, splits and held-out isolation."""

from __future__ import annotations

from collections import Counter

import pytest

from trajforge.envs.travel.formats import FlightRow
from trajforge.harness import run_episodes
from trajforge.policies.expert import ExpertPolicy
from trajforge.schema import ToolCall
import trajforge.envs.travel.plans as plans
from trajforge.tasks import read_tasks, synthesize, write_tasks
from trajforge.tasks.splits import combo_report, leaks, tool_combo
from trajforge.envs.travel.tasks import (
    COMPOSE_TEMPLATES,
    HELDOUT_TOOL_GROUPS,
    TEMPLATES,
    entity_strings,
    generate_compose_tasks,
    generate_travel_tasks,
    heldout_values,
    plan_tier,
)
from trajforge.tasks.verify import replay_reference

HELDOUT_ONLY = {t.id for t in TEMPLATES if t.heldout_only}


@pytest.fixture(scope="module")
def report():
    return generate_travel_tasks(160, seed=3)


def test_pool_shape_and_drop_counts(report):
    tasks = report.tasks
    assert len(tasks) == 160 and len({t.id for t in tasks}) == 160
    assert Counter(t.split for t in tasks) == {"train": 112, "test": 24, "heldout": 24}
    assert {t.tier for t in tasks} == {"easy", "medium", "hard"}
    assert {t.tier for t in tasks if t.split == "heldout"} == {"easy", "medium", "hard"}
    assert all(t.env == "travel" for t in tasks)
    # Candidates that make no task are counted by reason, never silently lost.
    assert report.dropped and set(report.dropped) <= {
        "no_option", "tie", "branch_indistinct", "ambiguous_weather", "already_booked",
        "duplicate", "reference_error", "verifier_rejected", "combo_leak"}
    assert "verifier_rejected" not in report.dropped and "reference_error" not in report.dropped


def test_every_reference_was_executed_and_verifies(report):
    for t in report.tasks:
        assert t.reference[-1].name == "finish"
        assert len(t.reasoning) == len(t.reference)
        assert replay_reference(t).correct, t.id
        assert t.expected["bookings"]


def test_expert_solves_every_kept_task_through_the_harness(report):
    trajs = run_episodes(report.tasks, ExpertPolicy())
    assert len(trajs) == len(report.tasks)
    assert all(t.verdict.correct and t.end == "submitted" for t in trajs), \
        [t.verdict.detail for t in trajs if not t.verdict.correct]
    # The expert's text carries the generator's sentences; tool messages are real env output.
    t = next(t for t in trajs if t.task_id.startswith("travel-weather_flight"))
    assert "forecast" in t.messages[2].content
    assert any(m.role == "tool" and m.content.startswith("Forecast for") for m in t.messages)


def test_heldout_entities_templates_and_combos_stay_out_of_train_and_test(report):
    held = heldout_values()
    for t in report.tasks:
        values = entity_strings(t)
        if t.split == "heldout":
            assert values <= held, (t.id, values - held)
        else:
            assert not values & held, (t.id, values & held)
            assert t.template not in HELDOUT_ONLY
            assert not leaks(tool_combo(t), HELDOUT_TOOL_GROUPS)
    combos = combo_report(report.tasks, HELDOUT_TOOL_GROUPS)
    assert combos.ok and combos.leaks == []
    unseen = [c for c in combos.heldout_only if "book_hotel" in c]
    assert any("get_weather" in c for c in unseen) and any("cancel_booking" in c for c in unseen)
    assert {t.template for t in report.tasks if t.split == "heldout"} & HELDOUT_ONLY == HELDOUT_ONLY


def test_branching_templates_take_both_branches():
    tasks = generate_travel_tasks(400, seed=5).tasks
    weather = [t for t in tasks if t.template == "weather_flight"]
    opening = {t.reasoning[1].split(" is forecast")[0] for t in weather}
    assert opening == {"Rain", "No rain"}
    for t in weather:
        assert t.tier == "hard" and t.reference[0].name == "get_weather"


def test_tiers_follow_the_plan():
    def calls(*names):
        return [ToolCall(name=n) for n in names]

    assert plan_tier(calls("search_flights", "book_flight", "finish"), False) == "easy"
    two = calls("search_flights", "book_flight", "search_hotels", "book_hotel", "finish")
    assert plan_tier(two, False) == "medium"
    assert plan_tier(calls("get_weather", "search_flights", "book_flight", "finish"), True) == "hard"
    seven = calls("search_flights", "book_flight", "search_hotels", "book_hotel",
                  "search_flights", "book_flight", "finish")
    assert plan_tier(seven, False) == "hard"


def test_generation_is_deterministic_and_round_trips_jsonl(tmp_path):
    a, b = generate_travel_tasks(40, seed=9), generate_travel_tasks(40, seed=9)
    assert a == b
    assert synthesize("travel", 40, seed=9).tasks == a.tasks
    path = write_tasks(tmp_path / "travel.jsonl", a.tasks)
    assert read_tasks(path) == a.tasks


def test_a_tool_path_that_disagrees_with_the_catalog_is_dropped(monkeypatch):
    real = plans.read_flights

    def misread(text):  # an agent-side parser that gets prices backwards
        rows = real(text)
        return [FlightRow(r.id, r.carrier, r.depart, r.arrive, 10_000 - r.price, r.seats)
                for r in rows]

    monkeypatch.setattr(plans, "read_flights", misread)
    report = generate_travel_tasks(30, seed=4)
    assert report.dropped.get("verifier_rejected", 0) > 0
    for t in report.tasks:  # whatever survived still verifies
        assert replay_reference(t).correct


def test_compose_tasks_teach_parts_of_the_heldout_templates_in_train_only():
    """``cancel_hotel``, ``latest_flight`` and ``hotel_any`` show, alone and in train, the part of
    each held-out-only template no train template shows (a hotel cancelled, the latest flight, a
    hotel of any rating); seen cities and days only, no held-out tool group, each verified and
    solved by the expert, and none the same task as a pool's own."""
    report = generate_compose_tasks(30, seed=2)
    tasks = report.tasks
    assert len(tasks) == 30 and {t.split for t in tasks} == {"train"}
    assert {t.template for t in tasks} == {t.id for t in COMPOSE_TEMPLATES}
    assert not {t.id for t in COMPOSE_TEMPLATES} & {t.id for t in TEMPLATES}
    held = heldout_values()
    for t in tasks:
        assert not entity_strings(t) & held, t.id
        assert not leaks(tool_combo(t), HELDOUT_TOOL_GROUPS), t.id
        assert replay_reference(t).correct, t.id
    cancel = next(t for t in tasks if t.template == "cancel_hotel")
    assert [c.name for c in cancel.reference] == ["list_bookings", "cancel_booking", "finish"]
    assert [b["kind"] for b in cancel.expected["bookings"]] == ["flight"]  # the hotel gone, the flight kept
    trajs = run_episodes(tasks, ExpertPolicy())
    assert all(t.verdict.correct for t in trajs)
    pool = {t.id for t in generate_travel_tasks(160, seed=2).tasks}
    assert not pool & {t.id for t in tasks}
    with pytest.raises(ValueError, match="no compose templates"):
        generate_compose_tasks(3, only=["rebook_hotel"])
    assert {t.template for t in synthesize("travel", 40, seed=2, compose=6,
                                          compose_templates=["latest_flight"]).tasks} >= {"latest_flight"}
