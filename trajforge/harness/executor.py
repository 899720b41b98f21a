"""Where environments run during a collection: executors and their per-episode handles.

An ``Executor`` opens one ``EnvHandle`` per episode (build the environment, ``reset`` it); the
harness then awaits ``execute`` / ``verify`` / ``close`` on the handle, each bounded by the tool
deadline. Two executors:

- ``AsyncioExecutor`` (default): environments live in this process. Each episode gets its own
  worker thread for its whole life, so every call of an episode runs on the same thread (an
  environment holding a thread-bound resource — a SQLite connection, a sync browser — works) and
  the event loop never blocks on a tool. A tool that hangs past its deadline strands only its own
  thread: the episode ends, the thread is abandoned (daemon: it never blocks interpreter exit;
  ``concurrent.futures`` pools would, their threads are joined at exit) and the next episode gets
  a fresh one.
- ``RayExecutor`` (``trajforge.harness.ray_executor``, ``--executor ray``): the same, inside Ray
  actors, so environments run on other cores or machines.

Environment failures surface as ``EnvFault``: a start that raised (``env_start``, retryable), a
call past its deadline (``tool_timeout`` / ``env_timeout``, not retryable: the environment is
stuck mid-call), a call that raised out of the environment (``tool_crash``, ``env_verify``: not
retryable, its state is unknown, but it is not busy and is closed as usual), or a lost worker
(``env_lost``).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from typing import Any, Callable, NamedTuple, Protocol

from trajforge._compat import moved_names
from trajforge.envs import Environment, make_env
from trajforge.envs.toolsets import class_toolset
from trajforge.harness.faults import describe
from trajforge.harness.loop import execute_call
from trajforge.schema import Task, ToolCall, ToolResult, Toolset, Verdict

EnvFactory = Callable[[Task], Environment]


def default_env_factory(task: Task) -> Environment:
    """The registered environment named by the task, seeded by it."""
    return make_env(task.env, seed=task.seed)


class EnvFault(Exception):
    """The environment, not the model, failed."""

    def __init__(self, kind: str, message: str, retryable: bool, elapsed_s: float = 0.0, stuck: bool = True):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.retryable = retryable
        self.elapsed_s = elapsed_s
        self.stuck = stuck
        """The environment may still be running the call (a deadline passed, a worker was lost),
        so nothing more may be sent to it; False when the call returned, by raising."""

    def __reduce__(self):  # crosses process boundaries (Ray actors) intact
        return EnvFault, (self.kind, self.message, self.retryable, self.elapsed_s, self.stuck)


class Executed(NamedTuple):
    """One executed call and whether it ended the episode (the environment's final tool)."""

    result: ToolResult
    done: bool


class EnvHandle(Protocol):
    """One episode's environment, wherever it runs. ``Episode`` reads ``toolset()`` from it as
    from an ``Environment``; ``observation`` is what ``reset`` returned."""

    observation: str

    def toolset(self) -> Toolset: ...

    async def execute(self, call: ToolCall, timeout_s: float) -> Executed: ...

    async def verify(self, timeout_s: float) -> Verdict: ...

    async def close(self, timeout_s: float) -> None: ...

    def abandon(self) -> None:
        """Give up on an environment stuck in a call: nothing more is sent to it."""


class Executor(Protocol):
    name: str

    async def open(self, task: Task, timeout_s: float) -> EnvHandle: ...

    async def aclose(self) -> None: ...


# ---- in-process executor ---------------------------------------------------------------------


class Worker(threading.Thread):
    """A daemon thread that runs one episode's environment calls, in order."""

    def __init__(self, pool: "WorkerThreads"):
        super().__init__(daemon=True, name="trajforge-env")
        self.pool = pool
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.start()

    def run(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            fn, done = job
            try:
                out, err = fn(), None
            except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
                out, err = None, e
            done(out, err)


class WorkerThreads:
    """Worker threads, reused across episodes (this executor's and the concurrent sampler's); an
    abandoned (stuck) one is simply not reused."""

    def __init__(self, max_idle: int = 256):
        self._idle: list[Worker] = []
        self._lock = threading.Lock()
        self.max_idle = max_idle
        self.abandoned = 0
        """Threads given up on because a call in them passed its deadline."""
        self._closed = False

    def checkout(self) -> Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return Worker(self)

    def checkin(self, worker: Worker) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.max_idle:
                self._idle.append(worker)
                return
        worker.jobs.put(None)

    def close(self) -> None:
        """End the idle threads now and every busy one when its episode hands it back. Idle
        threads used to live as long as the process: each collection (an RFT round, an in-loop
        eval) left its own, ~200 after the test suite's collections in one process."""
        with self._lock:
            self._closed, idle, self._idle = True, self._idle, []
        for worker in idle:
            worker.jobs.put(None)

    def abandon(self, worker: Worker) -> None:
        self.abandoned += 1
        worker.jobs.put(None)  # if the stuck call ever returns, the thread exits


async def call_on(worker: Worker, fn: Callable[[], Any], timeout_s: float | None) -> Any:
    """Run ``fn`` on ``worker`` and await it; TimeoutError after ``timeout_s`` (None: no limit)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def settle(out: Any, err: BaseException | None) -> None:
        if not fut.done():  # a call that already timed out is dropped
            if err is None:
                fut.set_result(out)
            else:
                fut.set_exception(err)

    def done(out: Any, err: BaseException | None) -> None:
        try:
            loop.call_soon_threadsafe(settle, out, err)
        except RuntimeError:  # an abandoned call that returned after its run's loop closed
            pass

    worker.jobs.put((fn, done))
    async with asyncio.timeout(timeout_s):
        return await fut


class LocalHandle:
    """An environment in this process, driven through its episode's own worker thread."""

    def __init__(self, env: Environment, worker: Worker, threads: WorkerThreads, toolset: Toolset,
                 observation: str = ""):
        self.env, self.worker, self.threads = env, worker, threads
        self.observation = observation
        self._toolset = toolset
        self._stuck = False

    def toolset(self) -> Toolset:
        return self._toolset

    async def _run(self, fn: Callable[[], Any], timeout_s: float, kind: str, what: str, crash: str) -> Any:
        """``fn`` on the episode's thread: a call past ``timeout_s`` is ``EnvFault(kind)`` (stuck),
        one that raised is ``EnvFault(crash)`` (not stuck)."""
        t0 = time.perf_counter()
        try:
            return await call_on(self.worker, fn, timeout_s)
        except TimeoutError:
            self.abandon()
            raise EnvFault(kind, f"{what} still running after {timeout_s:g}s", retryable=False,
                           elapsed_s=timeout_s) from None
        except Exception as e:  # noqa: BLE001 - whatever the environment raised is its fault, typed
            raise EnvFault(crash, f"{what} raised {describe(e)}", retryable=False,
                           elapsed_s=time.perf_counter() - t0, stuck=False) from None

    async def execute(self, call: ToolCall, timeout_s: float) -> Executed:
        def run() -> Executed:
            result = execute_call(self.env, call)
            return Executed(result, self.env.done)

        return await self._run(run, timeout_s, "tool_timeout", f"tool {call.name!r}", "tool_crash")

    async def verify(self, timeout_s: float) -> Verdict:
        return await self._run(self.env.verify, timeout_s, "env_timeout", "verify", "env_verify")

    async def close(self, timeout_s: float) -> None:
        if self._stuck:
            return
        try:
            await self._run(self.env.close, timeout_s, "env_timeout", "close", "env_close")
        except Exception:  # noqa: BLE001 - a failing close must not lose a finished episode
            self.abandon()
            return
        self.threads.checkin(self.worker)

    def abandon(self) -> None:
        if not self._stuck:
            self._stuck = True
            self.threads.abandon(self.worker)


class AsyncioExecutor:
    """Environments in this process, one worker thread per running episode (module docstring)."""

    name = "asyncio"

    def __init__(self, env_factory: EnvFactory = default_env_factory):
        self.env_factory = env_factory
        self.threads = WorkerThreads()

    async def open(self, task: Task, timeout_s: float) -> LocalHandle:
        worker = self.threads.checkout()

        def start() -> tuple[Environment, str]:
            env = self.env_factory(task)
            return env, env.reset(task)

        try:
            env, observation = await call_on(worker, start, timeout_s)
        except TimeoutError:
            self.threads.abandon(worker)
            raise EnvFault("env_timeout", f"starting env {task.env!r} took over {timeout_s:g}s",
                           retryable=False, elapsed_s=timeout_s) from None
        except Exception as e:  # noqa: BLE001 - a failed start is an env fault; retried by the harness
            self.threads.checkin(worker)
            raise EnvFault("env_start", describe(e), retryable=True) from None
        # One Toolset object per environment class: parsers index a toolset once per object.
        return LocalHandle(env, worker, self.threads, class_toolset(type(env)), observation)

    async def aclose(self) -> None:
        """Its worker threads end (busy ones as their episodes finish); open no episode after."""
        self.threads.close()


def make_executor(name: str, env_factory: EnvFactory = default_env_factory, **options: Any) -> Executor:
    """``asyncio`` (default) or ``ray`` (needs the ``ray`` extra)."""
    if name == "asyncio":
        return AsyncioExecutor(env_factory)
    if name == "ray":
        from trajforge.harness.ray_executor import RayExecutor

        return RayExecutor(env_factory, **options)
    raise ValueError(f"unknown executor {name!r}; use asyncio or ray")


__getattr__ = moved_names(__name__, {"Toolsets": "trajforge.envs.toolsets"})
