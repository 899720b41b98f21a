"""Code task generator: executed references, splits with held-out templates and values, drops,
and the expert solving every kept task through the real harness."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from tests.conftest import require_system
from trajforge.harness.loop import HarnessConfig, run_episodes
from trajforge.policies import make_policy
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.tasks import synthesize
from trajforge.envs.code.hidden import HiddenTests
from trajforge.envs.code.tasks import (
    TEMPLATES,
    TEMPLATES_BY_ID,
    build_task,
    generate_code_tasks,
    hidden_tests,
    pick_example,
    task_id,
)


@pytest.fixture(scope="module")
def pool():
    require_system("bwrap", "bubblewrap")
    return generate_code_tasks(20, seed=3)


@pytest.fixture(scope="module")
def one_per_template():
    """Every template once (held-out-only ones with held-out values): each reference executed."""
    require_system("bwrap", "bubblewrap")
    rng = random.Random(0)
    tasks = []
    for t in TEMPLATES:
        params = json.loads(json.dumps(
            {p.name: rng.choice(p.heldout if t.heldout_only else p.seen) for p in t.params}))
        built = build_task(t, params, "heldout" if t.heldout_only else "train")
        assert not isinstance(built, str), f"{t.id}: reference dropped ({built})"
        tasks.append(built)
    return tasks


def test_pool_has_the_requested_splits_and_tiers(pool):
    tasks = pool.tasks
    assert len(tasks) == 20 and pool.dropped.get("unfilled", 0) == 0
    splits = [t.split for t in tasks]
    assert splits == sorted(splits, key=["train", "test", "heldout"].index)
    assert (splits.count("train"), splits.count("test"), splits.count("heldout")) == (14, 3, 3)
    assert {t.tier for t in tasks} == {"easy", "medium", "hard"}
    assert {t.tier for t in tasks if t.split == "heldout"} == {"easy", "medium", "hard"}
    assert len({t.id for t in tasks}) == 20
    assert all(t.env == "code" and t.expected["function"] in t.prompt for t in tasks)


def test_heldout_has_its_own_templates_and_values(pool):
    seen_ids = {t.template for t in pool.tasks if t.split != "heldout"}
    assert not any(TEMPLATES_BY_ID[tid].heldout_only for tid in seen_ids)
    for task in pool.tasks:
        template = TEMPLATES_BY_ID[task.template]
        for p in template.params:
            value = json.loads(json.dumps(task.entities[p.name]))
            pool_values = p.heldout if task.split == "heldout" else p.seen
            assert value in json.loads(json.dumps(list(pool_values))), (task.id, p.name)
    # Every template's held-out values are disjoint from its seen ones.
    for template in TEMPLATES:
        for p in template.params:
            assert not set(map(str, p.seen)) & set(map(str, p.heldout)), (template.id, p.name)


def test_reference_plan_is_write_run_tests_submit(pool):
    for task in pool.tasks:
        assert [c.name for c in task.reference] == ["write_file", "run_tests", "submit"]
        assert task.reference[0].arguments["path"] == "solution.py"
        assert len(task.reasoning) == 3
        # The prompt shows one example, not the hidden tests.
        assert task.prompt.count("Example: `") == 1
        assert len(task.expected["cases"]) >= 6
        # The expert counts the tests run_tests runs: the visible ones, not the held-out ones.
        tests = HiddenTests.model_validate(task.expected)
        assert tests.held_out >= 2
        assert task.reasoning[2] == f"All {len(tests.visible)} tests pass, so I'll submit."


def test_the_prompt_example_is_a_visible_case(pool, one_per_template):
    """A held-out case's arguments and value appear nowhere the model reads, the prompt included."""
    for task in pool.tasks + one_per_template:
        tests = HiddenTests.model_validate(task.expected)
        example = pick_example(tests.visible)
        call = f"{tests.function}({', '.join(map(repr, example.args))})"
        assert f"Example: `{call}` returns `{example.expected!r}`." in task.prompt


def test_every_template_reference_passes_its_hidden_tests(one_per_template):
    assert {t.template for t in one_per_template} == set(TEMPLATES_BY_ID)


def test_expert_solves_every_kept_task_through_the_harness(pool, one_per_template):
    tasks = pool.tasks + one_per_template
    trajs = run_episodes(tasks, make_policy("expert"), HarnessConfig(max_turns=5))
    assert len(trajs) == len(tasks)
    by_id = {t.id: t for t in tasks}
    for traj in trajs:
        assert traj.verdict.correct, (traj.task_id, traj.verdict.detail)
        # What the expert says after run_tests matches what run_tests showed it.
        visible = len(HiddenTests.model_validate(by_id[traj.task_id].expected).visible)
        shown = next(m.content for m in traj.messages if m.role == "tool" and "visible" in m.content)
        assert shown.startswith(f"{visible}/{visible} visible tests passed."), shown
        assert traj.end == "submitted"
        assert traj.verdict.milestones == ["wrote_file", "ran_code", "tests_passed",
                                              "submitted"]


def test_a_wrong_model_fails_and_a_fixing_model_recovers(one_per_template):
    task = next(t for t in one_per_template if t.template == "scale_sum")
    k = task.entities["k"]
    write = '<tool_call>{{"name": "write_file", "arguments": {{"path": "solution.py", ' \
            '"content": "def scale_sum(nums):\\n    return sum(nums) * {k}\\n"}}}}</tool_call>'
    script = [write.format(k=k + 1), '<tool_call>{"name": "run_tests", "arguments": {}}</tool_call>',
              write.format(k=k), '<tool_call>{"name": "submit", "arguments": {}}</tool_call>']
    fixed, = run_episodes([task], ScriptedPolicy(script))
    assert fixed.verdict.correct
    assert "tests passed." in fixed.messages[5].content and "expected" in fixed.messages[5].content
    wrong, = run_episodes([task], ScriptedPolicy([script[0], script[3]]))
    assert wrong.verdict.submitted and not wrong.verdict.correct


def test_bad_references_and_weak_tests_are_dropped():
    require_system("bwrap", "bubblewrap")
    scale = TEMPLATES_BY_ID["scale_sum"]
    broken = replace(scale, id="broken", solution="def scale_sum(nums):\n    return {k}\n")
    assert build_task(broken, {"k": 3}, "train") == "verifier_rejected"
    constant = replace(scale, id="constant", oracle=lambda v, nums: 0)
    assert build_task(constant, {"k": 3}, "train") == "weak_tests"
    crashing = replace(scale, id="crashing", solution="def scale_sum(nums):\n    return 1 / 0\n")
    assert build_task(crashing, {"k": 3}, "train") == "verifier_rejected"


def test_ids_and_hidden_tests_are_stable():
    template = TEMPLATES_BY_ID["caesar"]
    assert task_id(template, {"k": 3}) == task_id(template, {"k": 3})
    assert task_id(template, {"k": 3}) != task_id(template, {"k": 4})
    assert hidden_tests(template, {"k": 3}) == hidden_tests(template, {"k": 3})


def test_a_small_space_is_reported_as_unfilled(monkeypatch):
    require_system("bwrap", "bubblewrap")
    import trajforge.envs.code.tasks as code_tasks

    tiny = tuple(replace(t, params=tuple(replace(p, seen=p.seen[:1], heldout=p.heldout[:1])
                                         for p in t.params))
                 for t in TEMPLATES if t.id in ("clamp", "scale_max"))
    monkeypatch.setattr(code_tasks, "TEMPLATES", tiny)
    report = code_tasks.generate_code_tasks(8, seed=0)
    assert len(report.tasks) == 2  # the one seen clamp task, and one held-out task
    assert report.dropped["unfilled"] == 6


def test_synthesize_dispatches_to_the_code_generator():
    require_system("bwrap", "bubblewrap")
    report = synthesize("code", 2, 0)
    assert [t.env for t in report.tasks] == ["code", "code"]
