"""Multi-agent pipelines: roles that hand typed results to each other, recorded as ONE trajectory.

    pipeline = sql_research_pipeline(gatherer=p1, analyst=p2, writer=p3)   # or build your own:
    pipeline = Pipeline(name="research", env="sql", roles=(
        Role(name="gatherer", policy=p1, tools=("list_tables", "describe_table", "run_sql"),
             prompt="Question: {task}\\nRun the query that answers it.", output=QueryResult),
        Role(name="analyst", policy=p2, tools=(), output=Selection,
             prompt="Question: {task}\\nWhat the gatherer found: {input}\\nPick the answer."),
        Role(name="writer", policy=p3, tools=("submit_answer",),
             prompt="Question: {task}\\nThe analyst's pick: {input}\\nSubmit the final answer."),
    ))
    trajs = run_pipeline(tasks, pipeline)
    writer_data = [pipeline.role_view(t, "writer") for t in trajs]

How a role hands over: a role with an ``output`` channel type gets one extra tool, ``handoff``,
whose parameters are that type's JSON schema. The dialect renders and parses it like any tool; an
accepted call is then validated against the pydantic type itself (constraints, validators). A
rejected handoff comes back to the role as a tool error it can fix (errors are values the model
sees); an accepted one ends the role's part and is what the next role receives as ``{input}``
(JSON). The last role has no output channel: it ends the pipeline through the environment's final
tool. A role whose policy is an adapter served by ``trajforge serve`` is
``OpenAIPolicy(url, adapter_name)``.

Each role runs in the ordinary episode loop (``Episode``) over a view of the one environment the
pipeline shares: only the role's tools, plus ``handoff``. Every role's messages and steps go into
one trajectory tagged with ``role_name``, so grading names the role a failure came from
(``Outcome.failed_role``) and ``role_view`` cuts one role's turns out for training that role alone.
Roles run stage by stage across all tasks: every task's first role is batched through its policy,
then every task's second role, and so on. As in the episode loop, an exception inside one task's
run (its environment, a role's policy, the handling of a turn) ends that run with a recorded
reason (``trajforge.harness.faults``), never the whole pipeline.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from trajforge._compat import moved_names
from trajforge.envs import Environment, env_toolset, make_env
from trajforge.envs.toolsets import KNOWN
from trajforge.harness.faults import HARNESS_ERROR, act_each, fault
from trajforge.harness.loop import Episode, HarnessConfig, close_quietly, conclude
from trajforge.schema import Fault, Message, Step, Task, ToolCall, ToolResult, ToolSpec, Toolset, Trajectory

HANDOFF = "handoff"
"""Name of the tool a role calls to pass its result on."""


class Role(BaseModel):
    """One agent in a pipeline."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str = Field(min_length=1)
    """Tag on every message and step this role produces."""
    policy: Any
    """Who acts for this role (any Policy)."""
    prompt: str
    """User-turn template: ``{task}`` is the task's prompt, ``{input}`` the previous role's output
    as JSON (write literal braces as ``{{`` and ``}}``)."""
    instructions: str = ""
    """System instructions above the dialect's tool block."""
    tools: tuple[str, ...] | None = None
    """Environment tools this role may call; None: all of them."""
    output: type[BaseModel] | None = None
    """Channel type handed to the next role; None for the last role, which ends the pipeline
    through the environment's final tool."""
    max_turns: int = 4
    """Turns this role gets before the pipeline ends with ``max_turns``."""
    max_consecutive_errors: int = 2
    """Turns in a row without a valid call before the pipeline ends with ``max_errors``."""


class Pipeline(BaseModel):
    """Roles in order over one environment; each role's output channel feeds the next role."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    """Recorded as the trajectory's policy."""
    env: str
    """Environment every role acts in (one instance per task, shared by the roles)."""
    roles: tuple[Role, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> "Pipeline":
        env_tools = env_toolset(self.env).names
        if HANDOFF in env_tools:
            raise ValueError(f"environment {self.env!r} has a tool named {HANDOFF!r}, which pipelines reserve")
        names = [r.name for r in self.roles]
        if len(set(names)) != len(names):
            raise ValueError(f"role names must be unique: {names}")
        for i, role in enumerate(self.roles):
            last = i == len(self.roles) - 1
            if last and role.output is not None:
                raise ValueError(f"role {role.name!r} is last: it ends the pipeline with the environment's "
                                 "final tool and has no output channel")
            if not last and role.output is None:
                raise ValueError(f"role {role.name!r} needs an output type: {self.roles[i + 1].name!r} reads it")
            unknown = sorted(set(role.tools or ()) - set(env_tools))
            if unknown:
                raise ValueError(f"role {role.name!r} lists tools {unknown} that {self.env!r} lacks "
                                 f"(it has {env_tools})")
            try:
                role.prompt.format(task="", input="")
            except (KeyError, IndexError, ValueError) as e:
                raise ValueError(f"role {role.name!r}: prompt template uses {e!s}; only {{task}} and "
                                 "{input} are filled (double other braces)") from None
            if i == 0 and "{input}" in role.prompt:
                raise ValueError(f"role {role.name!r} is first: there is no {{input}} to show it")
        return self

    def role(self, name: str) -> Role:
        for r in self.roles:
            if r.name == name:
                return r
        raise KeyError(f"no role {name!r} in pipeline {self.name!r}; roles: {[r.name for r in self.roles]}")

    def toolset(self, name: str) -> Toolset:
        """What role ``name`` is shown: its subset of the environment's tools, plus ``handoff``,
        under the role's instructions (kept in ``KNOWN``, so its fingerprint finds it)."""
        role = self.role(name)
        full = env_toolset(self.env)
        keep = set(full.names if role.tools is None else role.tools)
        tools = [t for t in full.tools if t.name in keep]
        if role.output is not None:
            tools.append(handoff_spec(role.output, self._next(role)))
        return KNOWN.canonical(Toolset(tools=tuple(tools), instructions=role.instructions))

    def role_view(self, traj: Trajectory, name: str) -> Trajectory:
        """Role ``name``'s turns as a trajectory of their own, with that role's toolset fingerprint,
        dialect and policy name: a training sample for that role alone. It is an ordinary
        trajectory: stored, its toolset goes into the store's ``toolsets/`` like any other, and
        ``toolset_for(view.toolset_fingerprint)`` renders it as the role saw it."""
        role = self.role(name)
        return role_view(traj, name).model_copy(update={
            "toolset_fingerprint": self.toolset(name).fingerprint, "dialect": role.policy.dialect.name,
            "policy": role.policy.name})

    def _next(self, role: Role) -> str:
        return self.roles[self.roles.index(role) + 1].name


def handoff_spec(output: type[BaseModel], to: str) -> ToolSpec:
    doc = " ".join((output.__doc__ or "").split())
    return ToolSpec(name=HANDOFF, description=(
        f"Hand your result to the {to}. Call it once, when you are done{': ' + doc if doc else '.'}"),
        parameters=output.model_json_schema())


def role_view(traj: Trajectory, name: str) -> Trajectory:
    """The messages and steps tagged ``name``, steps re-indexed from 0; everything else (outcome,
    verdict, fingerprint) stays the pipeline trajectory's."""
    steps = [s for s in traj.steps if s.role_name == name]
    if not steps:
        roles = sorted({s.role_name for s in traj.steps if s.role_name})
        raise KeyError(f"no turns of role {name!r} in trajectory {traj.task_id}; roles with turns: {roles}")
    return traj.model_copy(update={
        "messages": [m for m in traj.messages if m.role_name == name],
        "steps": [s.model_copy(update={"index": i}) for i, s in enumerate(steps)]})


class _RoleEnv:
    """The pipeline's one environment as a role sees it: its tools only, plus ``handoff``.

    The episode loop validates calls against ``toolset()`` before they get here, so a role cannot
    reach a tool outside its subset; ``handoff`` is answered here and never reaches the environment.
    """

    def __init__(self, env: Environment, role: Role, toolset: Toolset):
        self.env, self.role, self._toolset = env, role, toolset
        self.handed: BaseModel | None = None
        """The accepted handoff, once the role has made one."""

    def toolset(self) -> Toolset:
        return self._toolset

    @property
    def done(self) -> bool:
        return self.handed is not None or self.env.done

    def execute(self, call: ToolCall) -> ToolResult:
        if call.name != HANDOFF:
            return self.env.execute(call)
        try:
            self.handed = self.role.output.model_validate(call.arguments)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}"
                                 for err in e.errors())
            return self._rejected(problems[:2000])
        except Exception as e:  # noqa: BLE001 - a channel type's own validator raised on what the model wrote
            return self._rejected(f"{type(e).__name__} while checking it")
        return ToolResult(name=HANDOFF, content="Handed off.")

    @staticmethod
    def _rejected(problems: str) -> ToolResult:
        return ToolResult(name=HANDOFF, ok=False, error="invalid_handoff",
                          content=f"Error: handoff rejected ({problems}). Fix it and call {HANDOFF} again.")


class _Run:
    """One (task, sample) going through the pipeline."""

    def __init__(self, pipeline: Pipeline, task: Task, sample: int):
        self.pipeline, self.task, self.sample = pipeline, task, sample
        self.messages: list[Message] = []
        self.steps: list[Step] = []
        self.input: BaseModel | None = None
        self.end = ""
        self.faults: list[Fault] = []
        self.started = time.perf_counter()
        self.env: Environment | None = None
        self.observation = ""
        """Shown to the first role only: later roles get what the previous one handed over."""
        env = None
        try:
            env = make_env(pipeline.env, seed=task.seed)
            self.observation = env.reset(task)
            self.env = env
        except Exception as e:  # noqa: BLE001 - an environment that cannot start ends only this run
            if env is not None:
                close_quietly(env)
            self.fail("env_start", e)

    def fail(self, kind: str, error: BaseException, end: str = "env_fault") -> None:
        self.faults.append(fault(kind, error, step=len(self.steps)))
        self.end = end

    def episode(self, role: Role, toolset: Toolset) -> tuple[Episode, _RoleEnv]:
        view = _RoleEnv(self.env, role, toolset)
        given = self.input.model_dump_json() if self.input is not None else ""
        task = self.task.model_copy(update={"prompt": role.prompt.format(task=self.task.prompt, input=given)})
        observation = self.observation if self.input is None else ""
        return Episode(task, self.sample, view, role.policy, _config(role), observation=observation), view

    def absorb(self, role: Role, ep: Episode, view: _RoleEnv, last: bool) -> None:
        """Append the role's turns, tagged; pass its output on or end the run."""
        self.messages += [m.model_copy(update={"role_name": role.name}) for m in ep.messages]
        self.steps += [s.model_copy(update={"role_name": role.name, "index": len(self.steps) + i})
                       for i, s in enumerate(ep.steps)]
        self.faults += ep.faults
        if view.handed is not None and not self.env.done and not last:
            self.input = view.handed
        else:
            self.end = ep.end

    def finish(self) -> Trajectory:
        verdict = None
        if self.env is not None:
            verdict = conclude(self.env)
            if isinstance(verdict, Exception):
                self.fail("env_verify", verdict)
                verdict = None
        dialects = sorted({r.policy.dialect.name for r in self.pipeline.roles})
        return Trajectory(
            task_id=self.task.id, sample=self.sample, policy=self.pipeline.name, env=self.task.env,
            toolset_fingerprint=env_toolset(self.pipeline.env).fingerprint,
            dialect="+".join(dialects), tier=self.task.tier, split=self.task.split,
            messages=self.messages, steps=self.steps, verdict=verdict, end=self.end,
            reference_turns=len(self.task.reference), wall_s=time.perf_counter() - self.started,
            faults=self.faults)


def run_pipeline(tasks: Iterable[Task], pipeline: Pipeline, samples: int = 1,
                 on_done: Callable[[Trajectory], None] | None = None) -> list[Trajectory]:
    """Run every (task, sample) through the pipeline's roles; one trajectory each."""
    runs = [_Run(pipeline, t, s) for t in tasks for s in range(samples)]
    for i, role in enumerate(pipeline.roles):
        _stage(pipeline, role, [r for r in runs if not r.end], last=i == len(pipeline.roles) - 1)
    out = []
    for r in runs:
        traj = r.finish()
        if on_done:
            on_done(traj)
        out.append(traj)
    return out


def _stage(pipeline: Pipeline, role: Role, runs: list[_Run], last: bool) -> None:
    """One role's part for every run, batched through the role's policy."""
    toolset = pipeline.toolset(role.name)
    if hasattr(role.policy, "check_toolset"):
        role.policy.check_toolset(toolset.fingerprint)
    active = []
    for r in runs:
        try:
            active.append((r, *r.episode(role, toolset)))
        except Exception as e:  # noqa: BLE001 - handing the previous role's output on failed: this run only
            r.fail(HARNESS_ERROR, e, end=HARNESS_ERROR)
    cfg = _config(role)
    while active:
        batch = active[: role.policy.batch_size]
        t0 = time.perf_counter()
        gens = act_each(role.policy, [ep.request() for _, ep, _ in batch])
        gen_s = time.perf_counter() - t0
        for (_, ep, _), gen in zip(batch, gens):
            ep.take_turn(gen, gen_s, cfg)
        for run, ep, view in batch:
            if ep.end:
                run.absorb(role, ep, view, last)
        active = [a for a in active if not a[1].end]


def _config(role: Role) -> HarnessConfig:
    return HarnessConfig(max_turns=role.max_turns, max_consecutive_errors=role.max_consecutive_errors)


# ---- a concrete pipeline: gather → select → write, on the SQL environment ------------------------


class QueryResult(BaseModel):
    """The query you ran and the rows it returned, verbatim."""

    query: str = Field(min_length=1)
    """The SQL that answers the question."""
    result: str = Field(min_length=1)
    """run_sql's output for it."""


class Selection(BaseModel):
    """The value that answers the question, and why."""

    answer: str = Field(min_length=1)
    """Exactly the value to submit (a number, a name, or comma-separated names)."""
    reason: str = ""
    """One sentence on how the rows give it."""


def sql_research_pipeline(gatherer: Any, analyst: Any, writer: Any) -> Pipeline:
    """The three-role research task on the SQL environment: a gatherer queries, an analyst picks
    the answer from the rows, a writer submits it. Arguments are the roles' policies."""
    return Pipeline(name="sql-research", env="sql", roles=(
        Role(name="gatherer", policy=gatherer, tools=("list_tables", "describe_table", "run_sql"),
             instructions="You find data in a retail SQLite database. Explore the schema if you need "
                          "to, run the query that answers the question, then hand off its result.",
             prompt="Question: {task}", output=QueryResult, max_turns=6),
        Role(name="analyst", policy=analyst, tools=(), output=Selection,
             instructions="You read query results and pick the exact value that answers a question.",
             prompt="Question: {task}\nThe gatherer's query and its rows: {input}"),
        Role(name="writer", policy=writer, tools=("submit_answer",),
             instructions="You submit final answers.",
             prompt="Question: {task}\nThe analyst's selection: {input}\nSubmit the answer."),
    ))


__getattr__ = moved_names(__name__, {"env_class": "trajforge.envs.registry"})
