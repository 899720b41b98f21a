"""Code task templates: write one Python function to a spec; hidden unit tests decide.

``generate_code_tasks(n, seed)`` fills templates with parameter values (a multiplier, a letter,
a separator, a modulus...), builds each task's hidden tests — arguments drawn from a generator
seeded by the task id, edge cases first, expected values from the template's *oracle*, a trusted
Python function here in the generator; the last third are held out from ``run_tests`` and from
the prompt's example (``hidden.held_out_count``) — and a reference solution: the expert's
``write_file`` of the template's solution source, ``run_tests``, ``submit``. The reference is
executed in a real sandboxed ``CodeEnv`` and the task kept only if ``verify()`` accepts it, so
every kept task has been solved once by code that is not the oracle (two independent
implementations agree on every case).
Model-written code never runs here; the oracle and the solution sources are ours.

Drop reasons: ``duplicate`` (same template and values), ``weak_tests`` (every case expects the
same value, so a constant function would pass), ``reference_error`` (a reference call failed) and
``verifier_rejected`` (the reference solution did not pass its hidden tests).

The templates themselves (oracles, input generators, solution sources) are ``templates.py``;
``generator(world)`` draws them in another world (``worlds.py``: the function renamed, other test
inputs), for the train split of a pool drawn across worlds (``trajforge.tasks.worlds``).

Splits test generalisation along two axes, as in ``envs/sql/tasks.py``: ``heldout`` tasks take every
parameter from the template's held-out values (never in train or test), and templates with
``heldout_only=True`` — close cousins of seen ones, one per tier — appear only in ``heldout``.
"""

from __future__ import annotations

import json
import random
from typing import Any

from trajforge.envs.code.hidden import HiddenTests, TestCase
from trajforge.envs.code.templates import TEMPLATES, TEMPLATES_BY_ID, Param, Template
from trajforge.envs.code.worlds import world_templates
from trajforge.schema import Split, Task, ToolCall
from trajforge.tasks.pool import SynthReport
from trajforge.tasks.templates import TemplateGenerator, stable_id
from trajforge.tasks.verify import replay_reference

MODULE = "solution"

def task_id(template: Template, params: dict[str, Any], world: int = 0) -> str:
    """Stable id: the same template and parameter values (and world) give the same id (and
    tests); world 0 keeps the key it had before worlds."""
    return stable_id("code", template.id, [params, world] if world else params)


def generate_code_tasks(n: int, seed: int = 0) -> SynthReport:
    """``n`` verified code tasks split train/test/heldout, plus counts of dropped candidates.

    Fewer than ``n`` come back only when the template x parameter space runs out
    (``dropped["unfilled"]`` says how many places stayed empty).
    """
    return generator()(n, seed)


def draw_params(template: Template, rng: random.Random, heldout: bool) -> dict[str, Any]:
    params = {p.name: rng.choice(p.heldout if heldout else p.seen) for p in template.params}
    return json.loads(json.dumps(params))  # tuples become lists, as stored in a Task


def _space_size(template: Template, heldout: bool) -> int:
    size = 1
    for p in template.params:
        size *= len(p.heldout if heldout else p.seen)
    return size


def generator(world: int = 0) -> TemplateGenerator[Template]:
    """The code templates on the skeleton (of ``world``): tier-interleaved, each leaving once its
    parameter space is drawn."""
    templates = TEMPLATES if world == 0 else world_templates(world)
    return TemplateGenerator(templates=templates, interleave=True, draw=draw_params,
                             task_id=lambda t, p: task_id(t, p, world),
                             build=lambda t, p, split: build_task(t, p, split, world), space=_space_size)


def hidden_tests(template: Template, params: dict[str, Any], world: int = 0) -> HiddenTests:
    """The task's hidden unit tests: inputs seeded by the task id, expected values from the
    oracle (round-tripped through JSON, as the tests compare JSON values)."""
    values = template.values(params)
    rng = random.Random(task_id(template, params, world))
    cases: list[TestCase] = []
    seen_args: set[str] = set()
    for args in template.inputs(rng, values):
        key = json.dumps(args)
        if key in seen_args:
            continue
        seen_args.add(key)
        expected = json.loads(json.dumps(template.oracle(values, *args)))
        cases.append(TestCase(args=json.loads(key), expected=expected))
    return HiddenTests(module=MODULE, function=template.function, cases=cases)


def build_task(template: Template, params: dict[str, Any], split: Split, world: int = 0) -> Task | str:
    """Build the task (of ``world``: ``template`` is that world's), execute its reference in a
    sandboxed CodeEnv; the Task or a drop reason."""
    values = template.values(params)
    tests = hidden_tests(template, params, world)
    if len({json.dumps(c.expected) for c in tests.cases}) < 2:
        return "weak_tests"
    example = pick_example(tests.visible)  # a held-out case stays out of everything the model reads
    call = f"{template.function}({', '.join(map(repr, example.args))})"
    prompt = (f"Write a Python function `{template.function}({template.signature})` in "
              f"{tests.path} that {template.spec.format(**values)}\n\n"
              f"Example: `{call}` returns `{example.expected!r}`.")
    reference = (
        ToolCall(name="write_file", arguments={"path": tests.path,
                                               "content": template.solution.format(**values)}),
        ToolCall(name="run_tests"),
        ToolCall(name="submit"),
    )
    plan = template.plan.format(**values)
    reasoning = (f"I'll write {template.function} in {tests.path}: {plan}.",
                 "Now I'll run the hidden tests to check it.",
                 f"All {len(tests.visible)} tests pass, so I'll submit.")  # the visible ones
    task = Task(id=task_id(template, params, world), env="code", prompt=prompt, tier=template.tier,
                split=split, template=template.id, reference=reference,
                expected=tests.model_dump(), entities=params, reasoning=reasoning, world=world)
    verdict = replay_reference(task)
    if not verdict.correct:
        return "reference_error" if verdict.detail.startswith("reference call") \
            else "verifier_rejected"
    return task


def pick_example(cases: list[TestCase]) -> TestCase:
    """The case shown in the prompt: a middling one, not an edge case (empty input, 0, '')."""
    telling = [c for c in cases if c.expected not in ([], "", 0, None)
               and json.dumps(c.args) not in ('[""]', "[[]]", "[0]", "[1]")] or cases
    telling = sorted(telling, key=lambda c: len(json.dumps(c.args)))
    return telling[len(telling) // 2]


__all__ = [
    "MODULE", "Param", "TEMPLATES", "TEMPLATES_BY_ID", "Template", "build_task", "generate_code_tasks", "generator",
    "hidden_tests",
    "task_id",
]
