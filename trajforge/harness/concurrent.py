"""Asynchronous collection at scale: many episodes at once, deadlines, retries, fault records.

    trajs = run_concurrent(tasks, policy, cfg=CollectConfig(concurrency=64), on_done=store.append)

Up to ``concurrency`` episodes run at once; each runs its turns in order (request the model's
turn → parse → execute the calls in the environment → feed back) with the same ``Episode`` logic
as the batched loop in ``loop.py``, so both produce identical trajectories. Policies with an async
``act_one`` (``OpenAIPolicy``) are called per episode; others (``act``) run in a thread. The local
HF policy is better served by the batched ``run_episodes``, which generates a whole batch at once.

Three deadlines, each its own knob:
- model request (``request_timeout_s``): one HTTP request, connect to last byte;
- tool call (``tool_timeout_s``): one environment call (start, tool, verify) on its worker thread;
  a call past it ends the episode as ``env_fault`` (``tool_timeout``) and strands only its thread;
- episode (``episode_timeout_s``): working time, counted from when the episode gets its
  concurrency slot (not while it waits for one).

Retries, with exponential backoff and jitter, only for infrastructure: a request that failed with
429, 5xx, a reset or refused connection or a timeout, an environment that failed to start, a tool
that crashed. What the model wrote (no call, malformed call, invalid arguments, wrong answer) is
never retried: it is fed back to the model, as always. Each fault is recorded on the trajectory
(``Trajectory.faults``, ``Step.retries``), retried or not; one that could not be retried away ends
the episode with ``end="env_fault"``, which grading labels ``env_fault`` and training never uses.
Any other exception inside one episode ends that episode, recorded, never the run: raised by the
policy (``policy_error``) or the environment (``tool_crash``, ...) it is an ``env_fault``; raised
while handling the model's turn it is ``harness_error``, a failed episode
(``trajforge.harness.faults``).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, Callable, Iterable

from pydantic import BaseModel, Field

from trajforge._compat import moved_names
from trajforge.envs import env_class
from trajforge.harness.demos import episode_demos
from trajforge.harness.events import EventLog
from trajforge.harness.executor import (EnvFault, EnvHandle, Executed, Executor, WorkerThreads, call_on,
                                        default_env_factory, make_executor)
from trajforge.harness.faults import CONTEXT_EXCEEDED, HARNESS_ERROR, checked, fault
from trajforge.harness.loop import Episode, HarnessConfig, unstarted
from trajforge.parse.base import ParseResult
from trajforge.policies.base import ContextExceeded, Generation, Policy, RequestFault, TurnRequest
from trajforge.schema import Fault, SamplingConfig, Step, Task, ToolCall, Trajectory, Verdict


class CollectConfig(BaseModel):
    """How a collection runs at scale (the episode rules themselves are ``HarnessConfig``)."""

    concurrency: int = Field(8, ge=1)
    """Episodes running at once."""
    request_timeout_s: float | None = Field(None, gt=0)
    """Deadline of one model request; None uses the policy's own (``OpenAIPolicy(timeout_s=)``)."""
    tool_timeout_s: float = Field(60.0, gt=0)
    """Deadline of one environment call (start, tool, verify)."""
    episode_timeout_s: float = Field(900.0, gt=0)
    """Working time of one episode, from when it gets a concurrency slot."""
    retries: int = Field(3, ge=0)
    """Retries of one request / environment start / crashed tool call after a transient fault."""
    backoff_s: float = Field(0.5, ge=0)
    """Delay before the first retry; doubles with each attempt (then jittered to 50-100%)."""
    backoff_max_s: float = Field(10.0, ge=0)
    """Cap on one delay (a server's Retry-After is honoured up to this)."""


def sampling_of(policy: Any) -> SamplingConfig:
    """The sampling settings a policy runs with (part of each episode's idempotency key)."""
    explicit = getattr(policy, "sampling", None)
    if isinstance(explicit, SamplingConfig):
        return explicit
    max_tokens = getattr(policy, "max_tokens", getattr(policy, "max_new_tokens", None))
    temperature = float(getattr(policy, "temperature", 0.0) or 0.0)
    return SamplingConfig(temperature=temperature, top_p=float(getattr(policy, "top_p", 1.0)),
                          max_tokens=max_tokens, seed=getattr(policy, "seed", None))


def backoff_delay(attempt: int, cfg: CollectConfig, retry_after_s: float | None = None,
                  rng: random.Random | None = None) -> float:
    """Seconds to wait before retry ``attempt + 1``: exponential, capped, jittered, never shorter
    than the server's Retry-After (itself capped)."""
    base = min(cfg.backoff_max_s, cfg.backoff_s * 2 ** attempt)
    delay = base * (rng or random).uniform(0.5, 1.0)  # jitter: retries of many episodes spread out
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, cfg.backoff_max_s))
    return delay


class _Ended(Exception):
    """An episode ended on a fault already recorded in its ``faults``."""


class _Run:
    """What all episodes of one collection share."""

    def __init__(self, policy: Policy, harness: HarnessConfig, cfg: CollectConfig, executor: Executor,
                 log: EventLog):
        self.policy, self.harness, self.cfg, self.executor, self.log = policy, harness, cfg, executor, log
        self.sampling = sampling_of(policy)
        self.act_one = getattr(policy, "act_one", None)
        self.threads = WorkerThreads()
        """Daemon threads for a sync policy's calls. Not ``asyncio.to_thread``: its pool's threads
        are joined when ``asyncio.run`` ends (and at exit), so one call stuck past its episode's
        deadline held the whole run until it returned."""

    async def act(self, req: TurnRequest) -> Generation:
        if self.act_one is not None:
            return await self.act_one(req, timeout_s=self.cfg.request_timeout_s)
        worker = self.threads.checkout()  # sync policies: off the loop
        try:
            gens = await call_on(worker, lambda: list(self.policy.act([req])), None)
        except asyncio.CancelledError:  # the episode's deadline: the call still runs in that thread
            self.threads.abandon(worker)
            raise
        except BaseException:
            self.threads.checkin(worker)
            raise
        self.threads.checkin(worker)
        [gen] = gens
        return gen


class _EpisodeRun:
    """One episode under the three deadlines; its ``Episode`` does the turn logic."""

    def __init__(self, run: _Run, task: Task, sample: int):
        self.run, self.task, self.sample = run, task, sample
        self.cfg = run.cfg
        self.key = f"{task.id}#{sample}"
        self.started = time.perf_counter()
        self.faults: list[Fault] = []
        self.ep: Episode | None = None
        self.handle: EnvHandle | None = None
        self.verdict: Verdict | None = None
        self.turn: tuple[Step, ParseResult, float] | None = None
        """The step being executed (kept so an interrupted turn is still recorded)."""
        self.in_env = False
        """True while a call is in the environment; still True if the episode deadline cut the
        call short, and then the environment (busy on its thread) is abandoned, never closed."""
        self.stuck = False

    def fault(self, kind: str, message: str | BaseException, attempt: int = 0, elapsed_s: float = 0.0,
              retried: bool = False) -> None:
        """Record a fault: on the episode once it runs, else on this run (before its first turn)."""
        if self.ep is None:
            self.faults.append(fault(kind, message, None, attempt, elapsed_s, retried))
        else:
            self.ep.faults.append(fault(kind, message, len(self.ep.steps), attempt, elapsed_s, retried))

    async def backoff(self, attempt: int, retry_after_s: float | None = None) -> None:
        await asyncio.sleep(backoff_delay(attempt, self.cfg, retry_after_s))

    # ---- the three kinds of outside calls, each with its deadline and retry rule -------------

    async def open_env(self) -> EnvHandle:
        for attempt in range(self.cfg.retries + 1):
            t0 = time.perf_counter()
            try:
                return await self.run.executor.open(self.task, self.cfg.tool_timeout_s)
            except EnvFault as e:
                retry = e.retryable and attempt < self.cfg.retries
                self.fault(e.kind, e.message, attempt, time.perf_counter() - t0, retry)
                if not retry:
                    raise _Ended from None
            except Exception as e:  # noqa: BLE001 - an executor that raised untyped: the env did not start
                self.fault("env_start", e, attempt, time.perf_counter() - t0)
                raise _Ended from None
            await self.backoff(attempt)
        raise AssertionError("unreachable: the last attempt raises or returns")

    async def generate(self) -> tuple[Generation, float, int]:
        req, log, turn = self.ep.request(), self.run.log, len(self.ep.steps)
        for attempt in range(self.cfg.retries + 1):
            log.write("request_start", key=self.key, turn=turn, attempt=attempt)
            t0 = time.perf_counter()
            try:
                gen = checked(await self.run.act(req))
            except RequestFault as e:
                elapsed = time.perf_counter() - t0
                retry = e.retryable and attempt < self.cfg.retries
                log.write("request", key=self.key, turn=turn, attempt=attempt,
                          latency_s=round(elapsed, 4), status=e.kind, retry=retry)
                self.fault(e.kind, e.message, attempt, elapsed, retry)
                if not retry:
                    raise _Ended from None
                await self.backoff(attempt, e.retry_after_s)
                continue
            except ContextExceeded:  # the model's failure, not a fault: ``play`` ends the episode
                log.write("request", key=self.key, turn=turn, attempt=attempt,
                          latency_s=round(time.perf_counter() - t0, 4), status=CONTEXT_EXCEEDED, retry=False)
                raise
            except Exception as e:  # noqa: BLE001 - the policy broke (or answered no Generation): infrastructure
                elapsed = time.perf_counter() - t0
                log.write("request", key=self.key, turn=turn, attempt=attempt,
                          latency_s=round(elapsed, 4), status="policy_error", retry=False)
                self.fault("policy_error", e, attempt, elapsed)
                raise _Ended from None
            elapsed = time.perf_counter() - t0
            log.write("request", key=self.key, turn=turn, attempt=attempt,
                      latency_s=round(elapsed, 4), status="ok", retry=False)
            return gen, elapsed, attempt
        raise AssertionError("unreachable: the last attempt raises or returns")

    async def execute(self, call: ToolCall) -> Executed:
        log, turn = self.run.log, len(self.ep.steps)
        for attempt in range(self.cfg.retries + 1):
            log.write("tool_start", key=self.key, turn=turn, name=call.name)
            t0 = time.perf_counter()
            self.in_env = True  # stays True if the episode deadline interrupts the call
            try:
                out = await self.handle.execute(call, self.cfg.tool_timeout_s)
            except Exception as e:  # noqa: BLE001 - EnvFault, or an executor that raised untyped
                self.env_failed(e, "tool_crash", time.perf_counter() - t0, attempt)
                log.write("tool", key=self.key, turn=turn, name=call.name,
                          latency_s=round(time.perf_counter() - t0, 4), status="timeout" if self.stuck else "fault")
                raise _Ended from None
            self.in_env = False
            res = out.result
            status = "ok" if res.ok else "fault" if res.fault else "error"
            log.write("tool", key=self.key, turn=turn, name=call.name,
                      latency_s=round(time.perf_counter() - t0, 4), status=status)
            if not res.fault:
                return out
            retry = attempt < self.cfg.retries
            self.fault("tool_crash", res.content, attempt, res.elapsed_s, retry)
            if not retry:
                return out  # Episode.record sees the fault and ends the episode as env_fault
            await self.backoff(attempt)
        raise AssertionError("unreachable: the last attempt returns")

    # ---- the episode ----------------------------------------------------------------------------

    async def play(self) -> None:
        self.handle = await self.open_env()
        try:
            self.ep = Episode(self.task, self.sample, self.handle, self.run.policy, self.run.harness,
                              observation=self.handle.observation)
        except Exception as e:  # noqa: BLE001 - e.g. a handle whose toolset is broken: it did not start
            self.fault("env_start", e)
            raise _Ended from None
        self.ep.started = self.started
        while not self.ep.end:
            try:
                gen, gen_s, retries = await self.generate()
            except ContextExceeded:  # the model's own turns made the prompt that long
                self.ep.end = CONTEXT_EXCEEDED
                break
            step, parsed = self.ep.respond(gen, gen_s)
            step.retries = retries
            self.turn = (step, parsed, time.perf_counter())
            for call in parsed.calls:
                out = await self.execute(call)
                if self.ep.record(step, call, out.result, out.done):
                    break
            self.ep.close_step(step, parsed, time.perf_counter() - self.turn[2], self.run.harness)
            self.turn = None
        self.in_env = True
        try:
            self.verdict = await self.handle.verify(self.cfg.tool_timeout_s)
        except Exception as e:  # noqa: BLE001 - EnvFault, or an executor that raised untyped
            self.env_failed(e, "env_verify", getattr(e, "elapsed_s", 0.0), 0)
            raise _Ended from None
        self.in_env = False
        if self.verdict is None:  # a trajectory may hold none, so ``trajectory`` would let it pass
            self.fault("env_verify", "verify returned None, not a Verdict")
            raise _Ended

    def env_failed(self, e: Exception, kind: str, elapsed_s: float, attempt: int) -> None:
        """Record an environment call that failed: an ``EnvFault`` as it says (a stuck call leaves
        the environment busy, so it is abandoned, never closed); any other exception as ``kind``,
        with the environment treated as stuck (nothing is known about it)."""
        if isinstance(e, EnvFault):
            self.stuck = e.stuck
            self.fault(e.kind, e.message, attempt, elapsed_s)
        else:
            self.stuck = True
            self.fault(kind, e, attempt, elapsed_s)
        self.in_env = self.stuck

    def failed(self, e: Exception) -> None:
        """End the episode on an exception raised while handling its turn: ``harness_error``."""
        if self.ep is None:
            self.fault("env_start", e)
        else:
            self.ep.fail(HARNESS_ERROR, e, end=HARNESS_ERROR)

    def abort(self) -> None:
        """End the episode as an env fault where it stands (its last fault says why)."""
        if self.ep is None:
            return
        if self.turn is not None:  # keep the interrupted turn: its messages are already there
            step, parsed, t0 = self.turn
            self.ep.close_step(step, parsed, time.perf_counter() - t0, self.run.harness)
        self.ep.end = "env_fault"

    def trajectory(self) -> Trajectory:
        wall_s = time.perf_counter() - self.started
        if self.ep is None:  # the environment never started
            traj = unstarted(self.task, self.sample, self.run.policy, self.faults, wall_s)
        else:
            try:
                traj = self.ep.trajectory(self.verdict)
            except Exception as e:  # noqa: BLE001 - a verdict of the wrong shape: the env's fault
                self.ep.fail("env_verify", e)
                traj = self.ep.trajectory(None)
            traj.faults = self.faults + traj.faults
        traj.sampling = self.run.sampling
        return traj

    async def release(self) -> None:
        if self.handle is None:
            return
        try:
            if self.stuck or self.in_env:  # a call is still running in it: never touch it again
                self.handle.abandon()
            else:
                await self.handle.close(min(self.cfg.tool_timeout_s, 5.0))
        except Exception:  # noqa: BLE001 - the episode is recorded; a failing release loses nothing
            pass


async def run_episode(run: _Run, task: Task, sample: int) -> Trajectory:
    """One episode from its slot to its trajectory; never raises for infrastructure faults."""
    er = _EpisodeRun(run, task, sample)
    run.log.write("episode_start", key=er.key)
    deadline = asyncio.timeout(run.cfg.episode_timeout_s)
    try:
        try:
            async with deadline:
                await er.play()
        except _Ended:
            er.abort()
        except Exception as e:  # noqa: BLE001 - one episode's exception ends that episode, never the run
            if isinstance(e, TimeoutError) and deadline.expired():
                er.fault("episode_timeout", f"episode still running after {run.cfg.episode_timeout_s:g}s",
                         0, time.perf_counter() - er.started, False)
                er.abort()
            else:  # raised while handling the model's turn (outside calls are typed above)
                er.failed(e)
        traj = er.trajectory()
    finally:
        await er.release()
    run.log.write("episode_end", key=er.key, end=traj.end, wall_s=round(traj.wall_s, 4),
                  faults=len(traj.faults))
    return traj


async def arun_concurrent(
    tasks: Iterable[Task],
    policy: Policy,
    harness: HarnessConfig | None = None,
    cfg: CollectConfig | None = None,
    samples: int = 1,
    executor: Executor | str | None = None,
    on_done: Callable[[Trajectory], None] | None = None,
    skip: Callable[[Task, int], bool] | None = None,
    log: EventLog | None = None,
) -> list[Trajectory]:
    """Run every (task, sample) episode that ``skip`` does not exclude; return the trajectories.

    ``on_done`` is called as each episode ends (the store appends there, so a crash loses only
    running episodes). Episodes start in task order as slots free up. ``executor`` is an
    ``Executor`` (the caller releases it) or a name for ``make_executor`` (released here).
    """
    harness, cfg, log = harness or HarnessConfig(), cfg or CollectConfig(), log or EventLog(None)
    episode_demos(harness, policy)  # a missing or changed pool fails here, before any episode runs
    own = executor is None or isinstance(executor, str)
    if own:  # built here from its name, so released here too
        executor = make_executor(executor or "asyncio")
    todo = [(t, s) for t in tasks for s in range(samples) if not (skip and skip(t, s))]
    if getattr(executor, "env_factory", None) is default_env_factory:
        for name in sorted({t.env for t, _ in todo}):
            env_class(name)  # an unknown environment fails here, before any episode runs
    run = _Run(policy, harness, cfg, executor, log)
    log.write("run_start", executor=getattr(executor, "name", "?"), concurrency=cfg.concurrency,
              todo=len(todo), policy=policy.name)
    queue = iter(todo)
    done: list[Trajectory] = []

    async def worker() -> None:
        for task, sample in queue:  # shared iterator: the next free worker takes the next episode
            traj = await run_episode(run, task, sample)
            done.append(traj)
            if on_done:
                on_done(traj)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(cfg.concurrency, len(todo))):
                group.create_task(worker())
    finally:
        run.threads.close()
        aclose = getattr(policy, "aclose", None)
        if aclose is not None:
            await aclose()
        if own:
            await executor.aclose()
    log.write("run_end", done=len(done))
    return done


def run_concurrent(tasks: Iterable[Task], policy: Policy, harness: HarnessConfig | None = None,
                     cfg: CollectConfig | None = None, samples: int = 1,
                     executor: Executor | str | None = None,
                     on_done: Callable[[Trajectory], None] | None = None,
                     skip: Callable[[Task, int], bool] | None = None,
                     log: EventLog | None = None) -> list[Trajectory]:
    """``arun_concurrent`` on a fresh event loop (for callers that are not async themselves)."""
    return asyncio.run(arun_concurrent(tasks, policy, harness, cfg, samples, executor, on_done, skip, log))


__getattr__ = moved_names(__name__, {"collect_episodes": "trajforge.harness.concurrent:run_concurrent",
                                     "acollect": "trajforge.harness.concurrent:arun_concurrent"})
