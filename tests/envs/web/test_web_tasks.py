"""Web task generation: tiers, splits, held-out isolation, executed references, drops, expert."""

from __future__ import annotations

from collections import Counter

import pytest

from trajforge.envs.web.shop.catalog import build_catalog
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies.expert import ExpertPolicy
from trajforge.schema import ToolCall
from trajforge.tasks import synthesize
from trajforge.tasks.templates import split_sizes
from trajforge.envs.web.tasks import (
    HELDOUT_BRANDS,
    HELDOUT_CATEGORIES,
    HELDOUT_CLASSES,
    MILESTONES,
    TEMPLATES,
    TEMPLATES_BY_ID,
    generate_web_tasks,
    heldout_values,
    replay_reference,
)
from trajforge.envs.web.templates import Drop, Planner, Pools

HELDOUT_ONLY = {t.id for t in TEMPLATES if t.heldout_only}
N = 48


@pytest.fixture(scope="module")
def report():
    return generate_web_tasks(N, seed=3)


def test_template_catalogue():
    tiers = Counter(t.tier for t in TEMPLATES if not t.heldout_only)
    assert tiers["easy"] >= 3 and tiers["medium"] >= 4 and tiers["hard"] >= 4
    assert {TEMPLATES_BY_ID[t].tier for t in HELDOUT_ONLY} == {"easy", "medium", "hard"}


def test_sizes_tiers_and_splits(report):
    assert len(report.tasks) == N and "unfilled" not in report.dropped
    assert Counter(t.split for t in report.tasks) == split_sizes(N)
    for split in ("train", "heldout"):
        assert {t.tier for t in report.tasks if t.split == split} == {"easy", "medium", "hard"}
    ids = [t.id for t in report.tasks]
    assert len(ids) == len(set(ids))
    assert all(t.env == "web" and t.id.startswith(f"web-{t.template}-") for t in report.tasks)
    assert all(len(t.reasoning) == len(t.reference) for t in report.tasks)


def test_heldout_templates_and_entities_stay_out_of_train_and_test(report):
    held = heldout_values()
    assert set(HELDOUT_CATEGORIES) | set(HELDOUT_BRANDS) | set(HELDOUT_CLASSES) <= held
    catalog = build_catalog(0)
    for task in report.tasks:
        values = {str(v) for v in task.entities.values()}
        goal = task.expected
        names = ({i["name"] for i in goal["items"]} if goal["kind"] == "order"
                 else {catalog.workshop(goal["workshop"]).name})
        touches_heldout = bool((values | names) & held)
        if task.split == "heldout":
            assert touches_heldout, task.id
        else:
            assert not touches_heldout, task.id
            assert task.template not in HELDOUT_ONLY
            # Nor does the text the model reads for it name a held-out product or brand.
            assert not any(h in task.prompt for h in held), task.prompt


def test_every_reference_replays_with_all_milestones(report):
    for task in report.tasks:
        verdict = replay_reference(task)
        assert verdict.correct, (task.id, verdict.detail)
        assert tuple(verdict.milestones) == MILESTONES
        assert task.reference[-1].name == "click"
        assert task.reference[-1].arguments["element"] in ("Place order", "Book now")


def test_a_broken_reference_is_rejected(report):
    task = next(t for t in report.tasks if t.expected["kind"] == "order")
    shipping = "standard" if task.expected["shipping"] != "standard" else "express"
    changed = task.model_copy(update={"expected": {**task.expected, "shipping": shipping}})
    verdict = replay_reference(changed)
    assert verdict.submitted and not verdict.correct and "shipping is" in verdict.detail
    cut = task.model_copy(update={"reference": task.reference[:-1]})
    assert not replay_reference(cut).submitted


def test_drops_are_counted_by_reason(report):
    # Seed 3's draws hit some of the catalog's impossible or ambiguous cases; each is named.
    assert report.dropped and all(v > 0 for v in report.dropped.values())
    known = {"duplicate", "out_of_stock", "ambiguous_answer", "sold_out", "no_skip",
             "too_few_matches", "heldout_leak", "no_match", "reference_mismatch",
             "reference_error", "verifier_rejected", "milestones_incomplete"}
    assert set(report.dropped) <= known


def test_page_disagreeing_with_the_catalog_drops_the_task():
    from trajforge.envs.web.env import WebEnv
    from trajforge.schema import Task

    catalog = build_catalog(0)
    env = WebEnv()
    env.reset(Task(id="p", env="web", prompt="p", tier="easy", split="train", template="t",
                   reference=(), expected=None))
    planner = Planner(env, catalog)
    planner.do("home", "open", url="/category/desk-lamps?sort=price_desc")
    cheapest = min(catalog.in_category("Desk Lamps"), key=lambda p: p.price)
    with pytest.raises(Drop) as err:
        planner.first_product(cheapest.name)  # sorted the wrong way: the page disagrees
    assert err.value.reason == "reference_mismatch"
    with pytest.raises(Drop, match="reference_error"):
        planner.do("bad", "click", element="no such link")
    assert [c.name for c in planner.calls] == ["open"]
    env.close()
    assert Pools(catalog, heldout=True).categories() == list(HELDOUT_CATEGORIES)


def test_generation_is_deterministic():
    a, b = generate_web_tasks(12, seed=5), generate_web_tasks(12, seed=5)
    assert [t.model_dump() for t in a.tasks] == [t.model_dump() for t in b.tasks]
    assert a.dropped == b.dropped
    c = generate_web_tasks(12, seed=6)
    assert [t.id for t in a.tasks] != [t.id for t in c.tasks]
    assert synthesize("web", 12, seed=5).tasks == a.tasks


def test_expert_solves_every_task_through_the_harness(report):
    trajs = run_episodes(report.tasks, ExpertPolicy(), HarnessConfig(max_turns=20))
    assert len(trajs) == len(report.tasks)
    failed = [(t.task_id, t.end, t.verdict.detail) for t in trajs if not t.verdict.correct]
    assert not failed
    assert all(t.end == "submitted" and t.env == "web" for t in trajs)
    first = trajs[0]
    # The model-facing record holds the real pages the site served.
    tool_texts = [m.content for m in first.messages if m.role == "tool"]
    assert tool_texts[0].startswith("URL: /\nTitle: Home | Trailhead Outfitters")
    assert any(m.role == "assistant" and m.tool_calls == [ToolCall(name="open",
                                                                   arguments={"url": "/"})]
               for m in first.messages)
