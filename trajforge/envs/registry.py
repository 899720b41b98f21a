"""The environment registry: one ``EnvSpec`` per environment name, wherever the environment lives.

Three sources, looked up in this order:

1. ``register(spec)``: a spec registered in this process (a test, a notebook, your own package's
   import-time code);
2. the built-ins, one line each in ``BUILTINS`` (the module that exports ``SPEC``), imported the
   first time they are asked for;
3. the ``trajforge.envs`` entry-point group: a third-party package adds an environment without
   editing trajforge by declaring, in its ``pyproject.toml``::

       [project.entry-points."trajforge.envs"]
       counter = "my_package.counter:SPEC"        # an EnvSpec (or a function returning one)

   Loading an entry point imports that package, i.e. runs its code: install only packages you
   trust.

``mcp:PATH/tools.json`` names are tool-list environments (``trajforge.envs.mcp``), built from the
JSON and its sibling module; they go through this registry too.

    spec = env_spec("sql")             # EnvSpec: env class, generator, tiering, expert reasoning
    env = make_env("sql", seed=0)      # one fresh environment for one episode
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from trajforge.envs.base import Environment
from trajforge.schema import Mistake, Task, Tier, ToolCall, Trajectory

if TYPE_CHECKING:
    from trajforge.tasks.pool import SynthReport
    from trajforge.tasks.templates import TemplateGenerator

ENTRY_POINT_GROUP = "trajforge.envs"
BUILTINS: dict[str, str] = {
    "sql": "trajforge.envs.sql",
    "sql-exec": "trajforge.envs.sql:EXEC_SPEC",
    "travel": "trajforge.envs.travel",
    "web": "trajforge.envs.web",
    "code": "trajforge.envs.code",
}
"""Built-in environment name → the module exporting its ``SPEC`` (or ``module:NAME`` for a spec
under another name; adding one is one line here)."""
MCP_PREFIX = "mcp:"
DEFAULT_MAX_TURNS = 8
"""Turns an episode of an environment that names none gets, when its task has no reference."""


@dataclass(frozen=True)
class EnvSpec:
    """What trajforge needs to know about one environment; its folder exports one as ``SPEC``."""

    name: str
    """The name tasks and trajectories carry (``Task.env``)."""
    env: type[Environment]
    """The environment class; ``env(seed=...)`` serves one episode."""
    generate: Callable[[int, int], "SynthReport"] | None = None
    """Template generator: ``generate(n, seed)`` gives ``n`` verified tasks split train/test/heldout
    (``trajforge synth --env NAME``); None when tasks come only from elsewhere (an LLM, a file)."""
    world_generator: Callable[[int], "TemplateGenerator"] | None = None
    """The template generator of one world (``world_generator(w)``; 0 is ``generate``'s world),
    for pools drawn across worlds (``synthesize(..., worlds=K)``, ``trajforge synth --worlds K``;
    ``tasks.worlds``); None when the environment has no worlds."""
    compose: Callable[..., "SynthReport"] | None = None
    """Train-only templates that fill in the grids the held-out-only templates sit in (their parts
    in other combinations, never the held-out cells): ``compose(n, seed, only=ids)`` gives ``n``
    verified train tasks (of those template ids; all when ``only`` is empty) to add to a pool
    (``synthesize(..., compose=n)``, ``trajforge synth --compose n``); None when the environment
    has none."""
    tier: Callable[[Sequence[ToolCall]], Tier | None] | None = None
    """Structural tier of a reference plan, where the environment knows better than counting
    steps (SQL reads its queries); None or a None result falls back to ``tasks.tiering``."""
    reasoning: Callable[[Task, int], str] | None = None
    """The expert's sentence before reference call ``i`` of a task whose generator wrote none
    (pools from before ``Task.reasoning`` was filled); None: a neutral sentence."""
    summary: str = ""
    """One line about the environment, for help texts."""
    wrong_answer: Callable[[Trajectory], str | None] | None = None
    """How a submitted wrong answer went wrong, read off the trajectory (verdict, milestones, tool
    results): a fail reason such as ``retrieval_miss`` or ``logic_break`` (``grade/outcome.py``
    lists them); None, or a None result, grades it plain ``wrong_answer``."""
    grounded: Callable[[Trajectory], bool | None] | None = None
    """Whether an accepted answer was read off a tool result the agent saw (SQL: some result held
    the expected value, the ``found_answer`` milestone). False grades the episode ``guessed``
    (``Outcome.guessed``): right by luck, so it is neither a recovery nor training data. None, or
    a None result, where the environment cannot tell (its verifier checks state, not a value)."""
    progress: frozenset[str] | None = None
    """The milestones that show a failed episode got close to the answer (SQL: ``found_answer``, a
    result held it), which put it in the partial pool the GRPO curriculum draws from
    (``grade/pools.py``). Leave out the milestones nearly every attempt reaches (a query ran, a
    guess was submitted). None: any milestone counts; an empty set: no failure counts as close."""
    mistakes: Callable[[Task, Sequence[Task]], list[Mistake]] | None = None
    """Realistic mistakes for a task's self-repair demonstrations (``trajforge.tasks.repair``):
    ``mistakes(task, pool)`` gives this environment's wrong tables, columns, entities, nearest
    templates, intermediate results (``pool``: the other tasks, for the nearest template). Each is
    executed for real and must leave the episode solvable by the rest of the reference (a call
    that fails, or one that only reads). None: the generic kinds only (malformed, wrong tool, bad
    arguments)."""
    rephrase: Callable[[Task, int], str | None] | None = None
    """A task's question in its ``k``-th other wording (``k`` taken modulo their number), for train
    copies that say the same thing differently (``trajforge.tasks.rephrase``); None, or a None
    result, when the task's template has no other wording."""
    max_turns: int = DEFAULT_MAX_TURNS
    """Turns an episode gets when neither the harness config nor the task's reference sets them
    (``harness.budget.turn_budget``)."""


_registered: dict[str, EnvSpec] = {}
_entry_points: dict[str, Any] | None = None


def register(spec: EnvSpec, replace: bool = False) -> EnvSpec:
    """Make ``spec`` known under ``spec.name`` in this process; ValueError when the name is taken
    (by a registered or built-in environment) unless ``replace``."""
    if not isinstance(spec, EnvSpec):
        raise TypeError(f"register() takes an EnvSpec, not {type(spec).__name__}")
    if not replace and (spec.name in _registered or spec.name in BUILTINS):
        raise ValueError(f"environment {spec.name!r} is already registered; pass replace=True to replace it")
    if spec.name.startswith(MCP_PREFIX):
        raise ValueError(f"names starting with {MCP_PREFIX!r} are tool-list environments, not registrable")
    _registered[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Forget a spec registered in this process (built-ins and entry points stay)."""
    _registered.pop(name, None)


def env_spec(name: str) -> EnvSpec:
    """The spec registered under ``name``; KeyError listing the known names."""
    if name.startswith(MCP_PREFIX):
        from trajforge.envs.mcp import mcp_spec

        return mcp_spec(name[len(MCP_PREFIX):], name=name)
    if name in _registered:
        return _registered[name]
    if name in BUILTINS:
        module, _, attr = BUILTINS[name].partition(":")
        spec = getattr(importlib.import_module(module), attr or "SPEC")
        _registered[name] = spec
        return spec
    points = _plugin_points()
    if name in points:
        spec = _load_point(name, points[name])
        _registered[name] = spec
        return spec
    raise KeyError(f"unknown environment {name!r}; known: {env_names()} "
                   f"(or mcp:PATH/tools.json for a tool list)")


def graded_spec(name: str) -> EnvSpec | None:
    """The spec whose hooks grading reads (``wrong_answer``, ``grounded``, ``progress``), or None
    where grading goes on without them: a tool list (``mcp:``: its lookup would import the user's
    module) and an environment not installed here or whose plugin fails to load."""
    if name.startswith(MCP_PREFIX):
        return None
    try:
        return env_spec(name)
    except Exception:  # noqa: BLE001 - a missing or broken plugin: grading uses no hooks
        return None


def env_names() -> list[str]:
    """Every environment name this process can build (MCP tool lists aside)."""
    return sorted({*BUILTINS, *_registered, *_plugin_points()})


def env_class(name: str) -> type[Environment]:
    """The environment class registered under ``name``."""
    return env_spec(name).env


def make_env(name: str, seed: int = 0) -> Environment:
    """A fresh environment of ``name`` for one episode."""
    return env_class(name)(seed=seed)


def _plugin_points() -> dict[str, Any]:
    global _entry_points
    if _entry_points is None:
        _entry_points = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return _entry_points


def reload_entry_points() -> None:
    """Look the ``trajforge.envs`` entry points up again (after installing a package)."""
    global _entry_points
    _entry_points = None


def _load_point(name: str, point: Any) -> EnvSpec:
    value = point.load()
    spec = value() if callable(value) and not isinstance(value, EnvSpec) else value
    if not isinstance(spec, EnvSpec):
        raise TypeError(f"entry point {name} = {point.value} gives {type(spec).__name__}, not an EnvSpec")
    if spec.name != name:
        raise ValueError(f"entry point {name} = {point.value} gives the spec of {spec.name!r}")
    return spec


__all__ = ["BUILTINS", "DEFAULT_MAX_TURNS", "ENTRY_POINT_GROUP", "EnvSpec", "MCP_PREFIX", "env_class", "env_names", "env_spec",
           "make_env", "register", "reload_entry_points", "unregister"]
