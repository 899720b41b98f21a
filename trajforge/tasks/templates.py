"""The template skeleton every task generator shares: splits, balancing, tiers and drop records.

A generator is a list of templates plus what only its environment knows — how to draw a
template's entities from the seen or the held-out partition, and how to build (execute and
verify) one task from them. ``TemplateGenerator`` does the rest, the same way for every
environment:

- split sizes (``split_sizes``: 70/15/15, train takes the rounding remainder);
- two draws: train and test from the *seen* partition (seen templates and entities; a test
  task is never a train task), heldout from the *held-out* one (held-out entities, plus the
  ``heldout_only`` templates);
- round-robin over the templates (optionally tier-interleaved, easy/medium/hard, so even a small
  split gets every tier), each candidate going to the split furthest below its target, so the
  splits stay in proportion even when the entity space runs out;
- a template leaves the rotation when its entity space is exhausted (``space``), or after
  ``max_misses`` candidates in a row that were not kept; a global ``budget`` bounds the loop;
- every discarded candidate counted by reason (``duplicate``, the build's own reasons such as
  ``verifier_rejected``, ``unfilled`` places at the end) in the ``SynthReport``.

The smallest complete generator (see the README) uses ``SimpleTemplate`` — a prompt with slots,
the values each partition may use, and a plan of tool calls — with ``simple_generator``: each
plan is executed in the real environment, its expected value read off the execution and checked
by replaying it (``tasks.verify``), exactly as LLM-written tasks are.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from trajforge.schema import Split, Task, Tier, ToolCall
from trajforge.tasks.pool import SynthReport
from trajforge.tasks.verify import PlanRejected, stamp_toolset, verified

SPLIT_FRACTIONS: dict[Split, float] = {"train": 0.70, "test": 0.15, "heldout": 0.15}
SPLIT_ORDER: tuple[Split, ...] = ("train", "test", "heldout")
TIER_ORDER: tuple[Tier, ...] = ("easy", "medium", "hard")


def split_sizes(n: int) -> dict[Split, int]:
    """Deterministic split sizes for ``n`` tasks (train takes the rounding remainder)."""
    test = round(n * SPLIT_FRACTIONS["test"])
    heldout = round(n * SPLIT_FRACTIONS["heldout"])
    return {"train": n - test - heldout, "test": test, "heldout": heldout}


def stable_id(env: str, template: str, key: Any) -> str:
    """``env-template-<8 hex>``: the same template and key (entities, seeds) give the same id on
    any machine."""
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:8]
    return f"{env}-{template}-{digest}"


def interleave_tiers(templates: Sequence[Any]) -> list[Any]:
    """easy, medium, hard, easy, ...: templates grouped by tier, taken one of each in turn."""
    by_tier = [[t for t in templates if t.tier == tier] for tier in TIER_ORDER]
    return [t for group in itertools.zip_longest(*by_tier) for t in group if t is not None]


def neediest_split(targets: dict[Split, int], counts: Counter[str]) -> Split:
    """The split furthest below its target (relative to its size)."""
    return min((s for s in targets if counts[s] < targets[s]), key=lambda s: counts[s] / targets[s])


class TemplateLike(Protocol):
    """What the skeleton reads off a template; each environment's Template adds its own fields."""

    id: str
    heldout_only: bool


T = TypeVar("T", bound=TemplateLike)


@dataclass(frozen=True)
class TemplateGenerator(Generic[T]):
    """One environment's template generator: ``generator(n, seed)`` → ``SynthReport``."""

    templates: Sequence[T]
    draw: Callable[[T, random.Random, bool], dict[str, Any]]
    """Entities for one candidate: ``draw(template, rng, heldout)``."""
    task_id: Callable[[T, dict[str, Any]], str]
    """The stable id a candidate would get (duplicates are dropped before building)."""
    build: Callable[[T, dict[str, Any], Split], Task | str]
    """The executed, verified task, or the reason it was dropped."""
    space: Callable[[T, bool], int] | None = None
    """Distinct entity draws a template has in a partition; it leaves the rotation once they have
    all been drawn (None: unknown)."""
    max_misses: int | None = None
    """A template leaves the rotation after this many candidates in a row that were not kept."""
    budget: Callable[[int], int] | None = None
    """Most candidates one draw may try, given the tasks it wants (None: until the rotation empties)."""
    interleave: bool = False
    """Rotate tier by tier (``interleave_tiers``) instead of in the listed order."""
    heldout_repeat: int = 1
    """How often each ``heldout_only`` template stands in the held-out rotation (more weight for
    what only the held-out split tests)."""
    finish: Callable[[list[Task], Counter[str]], list[Task]] | None = None
    """A last pass over all kept tasks (e.g. dropping held-out tool-combination leaks)."""

    def __call__(self, n: int, seed: int = 0) -> SynthReport:
        rng = random.Random(seed)
        dropped: Counter[str] = Counter()
        seen: set[str] = set()
        sizes = split_sizes(n)
        tasks = (self.fill({"train": sizes["train"], "test": sizes["test"]}, rng, seen, dropped)
                 + self.fill({"heldout": sizes["heldout"]}, rng, seen, dropped))
        return self.report(tasks, dropped, n)

    def heldout_space(self, seed: int = 0, most: int = 10_000) -> SynthReport:
        """Every held-out task of the space (up to ``most``), without building the train and
        test splits first: held-out entities are their own partition, so this is the held-out
        set ``generator(n, seed)`` reaches once ``n`` is large enough to exhaust it (in another
        order: the train and test draws no longer advance the random generator first)."""
        dropped: Counter[str] = Counter()
        tasks = self.fill({"heldout": most}, random.Random(seed), set(), dropped)
        return self.report(tasks, dropped, 0)  # n=0: the space's end is not an "unfilled" place

    def compose(self, templates: Sequence[T], n: int, seed: int = 0, test: int = 0,
                only: Sequence[str] = ()) -> SynthReport:
        """``n`` train (and ``test`` test) tasks of ``templates`` (``only``: those ids) drawn with
        this generator's seen entities, builds and last pass: an environment's composition
        templates (``EnvSpec.compose``), to add to a pool's train split."""
        unknown = set(only) - {t.id for t in templates}
        if unknown:
            raise ValueError(f"no compose templates {sorted(unknown)}; there are "
                             f"{', '.join(t.id for t in templates)}")
        gen = dataclasses.replace(self, templates=tuple(t for t in templates if not only or t.id in only))
        dropped: Counter[str] = Counter()
        targets: dict[Split, int] = {s: k for s, k in (("train", n), ("test", test)) if k}
        tasks = gen.fill(targets, random.Random(seed), set(), dropped) if targets else []
        return gen.report(tasks, dropped, n + test)

    def report(self, tasks: list[Task], dropped: Counter[str], n: int) -> SynthReport:
        """The pool of what ``fill`` kept: the ``finish`` pass, toolsets stamped, grouped by split,
        and the places left empty counted as ``unfilled``."""
        if self.finish is not None:
            tasks = self.finish(tasks, dropped)
        tasks = [stamp_toolset(t) for t in sorted(tasks, key=lambda t: SPLIT_ORDER.index(t.split))]
        if len(tasks) < n:
            dropped["unfilled"] = n - len(tasks)
        return SynthReport(tasks=tasks, dropped=dict(dropped))

    def rotation(self, heldout: bool) -> list[T]:
        """The templates one draw cycles through."""
        rotation = [t for t in self.templates if heldout or not t.heldout_only]
        if self.interleave:
            rotation = interleave_tiers(rotation)
        if heldout:
            rotation += [t for t in self.templates if t.heldout_only] * (self.heldout_repeat - 1)
        return rotation

    def fill(self, targets: dict[Split, int], rng: random.Random, seen: set[str],
             dropped: Counter[str], vet: Callable[[Task], str | None] | None = None) -> list[Task]:
        """Draw candidates round-robin over templates until every split in ``targets`` is full.

        ``vet``: a last check on each built task; a reason it returns drops the task (counted)."""
        heldout = "heldout" in targets
        rotation = self.rotation(heldout)
        space = {t.id: self.space(t, heldout) for t in rotation} if self.space else {}
        rotation = [t for t in rotation if space.get(t.id) != 0]  # nothing to draw in this partition
        tried: dict[str, set[str]] = {t.id: set() for t in rotation}
        misses: Counter[str] = Counter()
        budget = self.budget(sum(targets.values())) if self.budget else None
        counts: Counter[str] = Counter()
        tasks: list[Task] = []
        i = 0
        while rotation and (budget is None or i < budget) and any(counts[s] < k for s, k in targets.items()):
            template = rotation[i % len(rotation)]
            i += 1
            entities = self.draw(template, rng, heldout)
            tid = self.task_id(template, entities)
            tried[template.id].add(tid)
            kept = None
            if tid in seen:
                dropped["duplicate"] += 1
            else:
                seen.add(tid)
                built = self.build(template, entities, neediest_split(targets, counts))
                if not isinstance(built, str) and vet is not None:
                    built = vet(built) or built
                if isinstance(built, str):
                    dropped[built] += 1
                else:
                    kept = built
                    tasks.append(built)
                    counts[built.split] += 1
            misses[template.id] = 0 if kept is not None else misses[template.id] + 1
            exhausted = template.id in space and len(tried[template.id]) >= space[template.id]
            if exhausted or (self.max_misses is not None and misses[template.id] >= self.max_misses):
                rotation.remove(template)
        return tasks


class Drop(Exception):
    """This candidate makes no good task; ``reason`` is counted in the SynthReport."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Recorder:
    """Runs reference calls through a real environment and records each with the expert's words.

    A call that fails drops the candidate (``Drop("reference_error")``): a reference solution
    never contains a failing call."""

    def __init__(self, env: Any):
        self.env = env
        self.calls: list[ToolCall] = []
        self.reasoning: list[str] = []

    def do(self, why: str, tool: str, **arguments: Any) -> str:
        """Execute ``tool(**arguments)``; its output, as the agent would see it."""
        call = ToolCall(name=tool, arguments=arguments)
        result = self.env.execute(call)
        if not result.ok:
            raise Drop("reference_error")
        self.calls.append(call)
        self.reasoning.append(why)
        return result.content


# ---- the smallest generator: slots, values, a plan --------------------------------------------

@dataclass(frozen=True)
class SimpleTemplate:
    """A prompt with ``{slots}``, the values each partition may fill them with, and the plan."""

    id: str
    tier: Tier
    prompt: str
    slots: dict[str, tuple[Sequence[Any], Sequence[Any]]]
    """Slot → (seen values, held-out values)."""
    plan: Callable[[dict[str, Any]], Sequence[ToolCall]]
    """The reference calls for the drawn entities; executed and verified before the task is kept."""
    reasoning: Callable[[dict[str, Any]], Sequence[str]] | None = None
    """The expert's sentence before each call (None: a neutral one)."""
    heldout_only: bool = False
    seed: int = 0
    """Environment seed the tasks run with."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else the environment's tasks need in ``Task.entities``."""


def simple_generator(env: str, templates: Sequence[SimpleTemplate]) -> TemplateGenerator[SimpleTemplate]:
    """A ``TemplateGenerator`` for ``SimpleTemplate``s of environment ``env``."""

    def draw(t: SimpleTemplate, rng: random.Random, heldout: bool) -> dict[str, Any]:
        return {k: rng.choice(list(values[1] if heldout else values[0])) for k, values in t.slots.items()}

    def task_id(t: SimpleTemplate, entities: dict[str, Any]) -> str:
        return stable_id(env, t.id, [entities, t.seed])

    def space(t: SimpleTemplate, heldout: bool) -> int:
        size = 1
        for values in t.slots.values():
            size *= len(values[1] if heldout else values[0])
        return size

    def build(t: SimpleTemplate, entities: dict[str, Any], split: Split) -> Task | str:
        calls = tuple(t.plan(entities))
        words = tuple(t.reasoning(entities)) if t.reasoning else ()
        probe = Task(id=task_id(t, entities), env=env, prompt=t.prompt.format(**entities), tier=t.tier,
                     split=split, template=t.id, reference=(), expected=None,
                     entities={**entities, **t.extra}, seed=t.seed, reasoning=words)
        try:
            task, _ = verified(probe, calls)
        except PlanRejected as e:
            return e.reason
        return task

    return TemplateGenerator(templates=templates, draw=draw, task_id=task_id, build=build, space=space,
                             interleave=True)


__all__ = ["Drop", "Recorder", "SPLIT_FRACTIONS", "SPLIT_ORDER", "SimpleTemplate", "TemplateGenerator",
           "interleave_tiers", "neediest_split", "simple_generator", "split_sizes", "stable_id"]
