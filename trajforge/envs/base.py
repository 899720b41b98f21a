"""Environment protocol: tools are typed methods; the base class derives the Toolset and dispatches.

An environment instance serves exactly one episode: ``reset(task)`` (returns the first
observation, which the harness shows the model under the task's prompt), then ``execute(call)`` per valid call, then ``verify()``. ``snapshot()`` /
``restore()`` capture and put back the full episode state, so guided exploration and branching
rollouts can rewind to a good step.

What a failing tool means (the rule lives in ``execute``, the one dispatch): any exception raised
inside a tool body is a tool error the model sees — a ``ToolError`` with its kind, or any other
exception as ``tool_exception`` — and becomes the episode's ``fail_reason`` if nothing better
follows. Only ``InfraError``, which an environment raises on purpose when its own machinery failed
(its server died, a worker process could not start, a dependency is missing), is an
infrastructure fault: ``env_fault``, retried by the harness, never held against the model. An
undeclared crash is the model's because its arguments are the one thing that varies between calls:
if a crash on garbage input were a fault, it would be retried and left out of the metrics, and a
policy could learn that writing garbage makes its failures vanish.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any, ClassVar

from trajforge.parse.limits import clean_text, short
from trajforge.schema import Task, ToolCall, ToolResult, ToolSpec, Toolset, Verdict

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 2000
"""A tool error message is cut to this many characters: it goes back into the model's context,
and an environment that echoes a megabyte argument must not put a megabyte there."""
MAX_RESULT_CHARS = 100_000
"""A tool result is cut to this many characters, whatever the tool returned (the built-in tools
cap their own output far below; a user's MCP function that echoes its input may not)."""


class ToolError(Exception):
    """A tool refused or failed because of what the model asked (bad SQL, unknown table...)."""

    def __init__(self, message: str, kind: str = "tool_error"):
        super().__init__(message)
        self.kind = kind


class InfraError(Exception):
    """The environment's own machinery failed, not the model: its server is down, a worker process
    could not start, a dependency is missing. Raise it on purpose, where such a failure is detected;
    it is the only exception a tool body may raise that ends as ``env_fault`` (retried by the harness,
    never a negative). ``kind`` names the failure (``web_server_down``, ``sql_worker``, ...)."""

    kind: str = "env_fault"

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class Environment:
    """Base class: subclasses list their tool methods in ``tool_names`` and implement verify."""

    name: ClassVar[str] = ""
    tool_names: ClassVar[tuple[str, ...]] = ()
    instructions: ClassVar[str] = ""
    """System instructions shown to the model above the tool block."""
    final_tool: ClassVar[str | None] = None
    """Calling this tool ends the episode (e.g. ``submit_answer``)."""
    expected_from_writer: ClassVar[bool] = False
    """True when a task's expectation cannot be read off an execution and must come from the task
    writer (a code task's hidden tests): synthesis then requires it in the proposal, validates it
    with ``check_expected`` and keeps the task only if the executed reference satisfies it."""
    state_fields: ClassVar[tuple[str, ...]] = ()
    """Extra instance attributes (beyond done/milestones) that make up the episode state.

    The default ``snapshot`` deep-copies them; environments whose state lives outside Python
    objects (a server, a work directory) override ``snapshot``/``restore`` instead."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.task: Task | None = None
        self.done = False
        self.milestones: list[str] = []

    @classmethod
    def toolset(cls) -> Toolset:
        """The toolset this class shows the model, built from its tool methods and instructions.

        Consumers do not call this per episode: ``trajforge.envs.env_toolset(name)`` builds it once
        and every stored record names it by fingerprint (``trajforge.envs.toolsets``)."""
        return Toolset(tools=tuple(ToolSpec.from_function(getattr(cls, n)) for n in cls.tool_names),
                       instructions=cls.instructions)

    def reset(self, task: Task) -> str:
        """Start an episode on ``task``; returns the first observation ("" when there is none)."""
        self.task = task
        self.done = False
        self.milestones = []
        return ""

    def snapshot(self) -> dict[str, Any]:
        """The full episode state, restorable with ``restore`` (on this instance)."""
        names = ("done", "milestones", *self.state_fields)
        return copy.deepcopy({n: getattr(self, n) for n in names})

    def restore(self, snap: dict[str, Any]) -> None:
        """Put back a state taken by ``snapshot``; later snapshots stay valid."""
        for name, value in copy.deepcopy(snap).items():
            setattr(self, name, value)

    def reach(self, milestone: str) -> None:
        """Record a process milestone once."""
        if milestone not in self.milestones:
            self.milestones.append(milestone)

    def execute(self, call: ToolCall) -> ToolResult:
        """Run one already-validated call. Never raises."""
        start = time.perf_counter()
        if call.name not in self.tool_names:
            # The harness validates first; reaching here means a caller skipped validation.
            return ToolResult(name=clean_text(call.name[:200]), content=f"Error: unknown tool "
                              f"{short(call.name)}", ok=False, error="unknown_tool")
        try:
            out = self.call_tool(call.name, call.arguments)
            result = ToolResult(name=call.name, content=_bounded(str(out), MAX_RESULT_CHARS))
        except ToolError as e:
            result = _error_result(call.name, _text(e), e.kind)
        except InfraError as e:
            result = ToolResult(name=call.name, content=_bounded(f"Error: {_text(e)}"), ok=False,
                                error=e.kind, fault=True)
        except Exception as e:  # noqa: BLE001 - the rule above: undeclared means the model's
            _log_exception(self.name, call.name, e)
            result = _error_result(call.name, f"{call.name} failed on these arguments "
                                   f"({type(e).__name__}: {_text(e)})", "tool_exception")
        if call.name == self.final_tool and result.ok:
            self.done = True
        return result.model_copy(update={"elapsed_s": time.perf_counter() - start})

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run tool ``name``: the method of that name. Environments whose tools are not methods
        (``mcp``: plain functions from a user's module) override this one dispatch point."""
        return getattr(self, name)(**arguments)

    def verify(self) -> Verdict:
        raise NotImplementedError  # abstract: every environment defines its verifier

    # ---- task synthesis hooks (``trajforge.tasks.llm``); defaults fit answer-submitting envs ---

    def describe_for_synthesis(self) -> str:
        """What a task writer must know beyond the tool schema (after ``reset``).

        The default is the environment's instructions; environments with content the tasks are
        about (a database, a repository, a site) override it to show that content.
        """
        ending = f" The episode ends when the agent calls {self.final_tool}." if self.final_tool else ""
        return f"Environment {self.name!r}. {self.instructions}{ending}".strip()

    @classmethod
    def check_expected(cls, value: Any) -> Any:
        """A writer-supplied ``task.expected`` in canonical form; ValueError naming what is wrong."""
        return value

    def expected_outcome(self) -> Any:
        """The ``task.expected`` that makes ``verify()`` accept the episode just run.

        Synthesis executes a proposed reference plan, then asks this, so a task's expected value
        always comes from execution and never from what a task writer claimed. The default is the
        submitted answer; environments verified on their end state return that state. Raise
        ``ToolError(message, kind=reason)`` when the episode defines no usable expectation.
        """
        verdict = self.verify()
        if not verdict.submitted:
            raise ToolError("the plan never submitted an answer", kind="no_final_call")
        return verdict.answer

    def close(self) -> None:
        """Release per-episode resources."""


def _text(e: Exception) -> str:
    """An exception's message, whatever it holds (``str`` of an int past the digit limit raises)."""
    try:
        return str(e)[:4 * MAX_ERROR_CHARS]
    except Exception:  # noqa: BLE001 - the message is lost, the error is not
        return ""


def _bounded(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` as valid UTF-8 text of at most about ``limit`` characters."""
    if len(text) > limit:
        text = f"{text[:limit]}... [{len(text) - limit} characters cut]"
    return clean_text(text)


def _error_result(tool: str, message: str, kind: str) -> ToolResult:
    return ToolResult(name=tool, content=_bounded(f"Error: {message}"), ok=False, error=kind)


_LOGGED: set[tuple[str, str, str]] = set()


def _log_exception(env: str, tool: str, e: Exception) -> None:
    """An undeclared exception is the model's (see the module docstring), but it may also be a bug
    in the environment: say so once per (environment, tool, exception type), with the traceback."""
    key = (env, tool, type(e).__name__)
    if key not in _LOGGED and len(_LOGGED) < 1000:
        _LOGGED.add(key)
        log.warning("%s.%s raised %s on the model's arguments; the model sees it as a "
                    "tool_exception (raise ToolError or InfraError to classify it)", env, tool,
                    type(e).__name__, exc_info=e)
