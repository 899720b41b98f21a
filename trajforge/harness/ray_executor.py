"""Ray executor: environments run inside Ray actors (``--executor ray``; ``pip install trajforge[ray]``).

Each ``EnvWorker`` actor is an async actor hosting an ``AsyncioExecutor``: it keeps the
environments of the episodes assigned to it (by episode id), gives each its own thread, and
enforces the tool deadline right where the tool runs, exactly as in-process collection does. The
driver assigns a new episode to the actor with the fewest open environments and awaits the
actor's answers as asyncio futures, with a deadline of its own (tool deadline + a margin) in case
the actor itself is lost.

Model calls stay in the driver. The driver's single event loop already multiplexes hundreds of
HTTP requests to the model servers at almost no cost, and the servers (vLLM, SGLang) do the heavy
lifting elsewhere; what needs more cores, isolation from crashes, or other machines is
environment execution (sandboxes, databases, browsers), so only that moves to actors. Trajectories
are assembled and stored by the driver, which is therefore the one writer of its store shard.

If ``ray`` is not initialised, ``RayExecutor`` starts a local instance (``ray.init()``); to use a
cluster, call ``ray.init(address=...)`` before collecting.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from trajforge._compat import moved_names
from trajforge.envs.toolsets import KNOWN
from trajforge.harness.executor import AsyncioExecutor, EnvFactory, EnvFault, Executed, default_env_factory
from trajforge.harness.faults import describe
from trajforge.schema import Task, ToolCall, Toolset, Verdict

_MARGIN_S = 5.0
"""Extra time the driver gives an actor beyond the deadline the actor enforces itself."""


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError("the ray executor needs Ray: pip install 'trajforge[ray]'") from None
    return ray


class EnvWorker:
    """Actor body: environments of many episodes, each on its own thread (see module docstring)."""

    def __init__(self, env_factory: EnvFactory):
        self.executor = AsyncioExecutor(env_factory)
        self.handles: dict[int, Any] = {}

    async def open(self, eid: int, task: Task, timeout_s: float) -> tuple[Toolset, str]:
        handle = await self.executor.open(task, timeout_s)
        self.handles[eid] = handle
        return handle.toolset(), handle.observation

    async def execute(self, eid: int, call: ToolCall, timeout_s: float) -> Executed:
        return await self.handles[eid].execute(call, timeout_s)

    async def verify(self, eid: int, timeout_s: float) -> Verdict:
        return await self.handles[eid].verify(timeout_s)

    async def close(self, eid: int, timeout_s: float) -> None:
        handle = self.handles.pop(eid, None)
        if handle is not None:
            await handle.close(timeout_s)

    def abandon(self, eid: int) -> None:
        handle = self.handles.pop(eid, None)
        if handle is not None:
            handle.abandon()

    def stats(self) -> dict[str, int]:
        return {"open": len(self.handles), "abandoned_threads": self.executor.threads.abandoned}


class RayHandle:
    """One episode's environment inside an ``EnvWorker`` actor."""

    def __init__(self, executor: "RayExecutor", actor: Any, eid: int, toolset: Toolset, observation: str):
        self.executor, self.actor, self.eid = executor, actor, eid
        self._toolset, self.observation = toolset, observation
        self._gone = False

    def toolset(self) -> Toolset:
        return self._toolset

    async def execute(self, call: ToolCall, timeout_s: float) -> Executed:
        return await self.executor.ask(self.actor.execute.remote(self.eid, call, timeout_s), timeout_s)

    async def verify(self, timeout_s: float) -> Verdict:
        return await self.executor.ask(self.actor.verify.remote(self.eid, timeout_s), timeout_s)

    async def close(self, timeout_s: float) -> None:
        if self._gone:
            return
        self._gone = True
        self.executor.release(self.actor)
        try:
            await self.executor.ask(self.actor.close.remote(self.eid, timeout_s), timeout_s)
        except EnvFault:
            pass  # the episode is already recorded; a failing close loses nothing

    def abandon(self) -> None:
        if not self._gone:
            self._gone = True
            self.executor.release(self.actor)
            self.actor.abandon.remote(self.eid)  # fire and forget


class RayExecutor:
    """Environments in ``workers`` Ray actors (default: one per CPU Ray reports)."""

    name = "ray"

    def __init__(self, env_factory: EnvFactory = default_env_factory, workers: int | None = None,
                 max_concurrency: int = 1000):
        ray = _ray()
        if not ray.is_initialized():
            ray.init(include_dashboard=False, log_to_driver=False)
        n = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        # An async actor runs up to max_concurrency calls at once on its event loop; the calls
        # themselves run on per-episode threads, so a stuck tool holds only its own thread.
        actor_cls = ray.remote(num_cpus=0, max_restarts=-1)(EnvWorker)
        self.actors = [actor_cls.options(max_concurrency=max_concurrency).remote(env_factory)
                       for _ in range(n)]
        self.load = {i: 0 for i in range(n)}
        self._ids = itertools.count()
        self._ray = ray

    def release(self, actor: Any) -> None:
        self.load[self.actors.index(actor)] -= 1

    async def ask(self, ref: Any, timeout_s: float) -> Any:
        """Await an actor call; the actor enforces ``timeout_s`` itself, the margin covers a lost
        actor. Faults raised in the actor come back as ``EnvFault``."""
        try:
            async with asyncio.timeout(timeout_s + _MARGIN_S):
                return await ref
        except TimeoutError:
            raise EnvFault("env_lost", f"env worker did not answer within {timeout_s + _MARGIN_S:g}s",
                           retryable=False, elapsed_s=timeout_s + _MARGIN_S) from None
        except self._ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, EnvFault):
                raise cause from None
            raise EnvFault("env_lost", f"env worker failed: {describe(cause) if cause else describe(e)}",
                           retryable=False) from None
        except self._ray.exceptions.RayActorError as e:
            raise EnvFault("env_lost", f"env worker died: {describe(e)}", retryable=False) from None
        except self._ray.exceptions.RayError as e:  # an object lost, a system error: the worker's side
            raise EnvFault("env_lost", f"env worker failed: {describe(e)}", retryable=False) from None

    async def open(self, task: Task, timeout_s: float) -> RayHandle:
        i = min(self.load, key=self.load.get)
        actor, eid = self.actors[i], next(self._ids)
        self.load[i] += 1
        try:
            toolset, observation = await self.ask(actor.open.remote(eid, task, timeout_s), timeout_s)
        except EnvFault:
            self.load[i] -= 1
            raise
        # The actor's toolset arrives as a copy; hand every episode the one object per fingerprint.
        return RayHandle(self, actor, eid, KNOWN.canonical(toolset), observation)

    async def aclose(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []


__getattr__ = moved_names(__name__, {"Toolsets": "trajforge.envs.toolsets"})
