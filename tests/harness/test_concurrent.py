"""Async collection against a real loopback OpenAI-compatible server: faults, deadlines, retries.

The "model" is ``tests.openai_server`` replaying each task's reference; environments are the real
SQL environment and the test-only ``FaultyEnv`` (a tool that hangs, a tool or a start that fails).
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.harness.toy_envs import FaultyEnv, factory, faulty_task
from tests.openai_server import OpenAIServer
from trajforge.eval.metrics import evaluate
from trajforge.eval.run import collect
from trajforge.grade import graded
from trajforge.harness import AsyncioExecutor, CollectConfig, HarnessConfig, run_concurrent
from trajforge.harness.concurrent import backoff_delay
from trajforge.harness.events import EventLog, interrupted_runs, read_events
from trajforge.policies import make_policy
from trajforge.store import TrajectoryStore
from trajforge.tasks import synthesize

FAST = dict(backoff_s=0.01, backoff_max_s=0.05)
KIND = {"429": "http_429", "500": "http_500", "reset": "connection"}


@pytest.fixture(scope="module")
def sql_tasks():
    return synthesize("sql", 100, seed=3).tasks


@pytest.fixture(autouse=True)
def _reset_faulty():
    FaultyEnv.crashes = FaultyEnv.failing_starts = 0
    yield


def policy(srv: OpenAIServer, **kw):
    return make_policy(f"openai:{srv.url}#m", **kw)


def test_injected_server_faults_are_retried_recorded_and_never_negatives(sql_tasks, tmp_path):
    with OpenAIServer(sql_tasks, fault_rate=0.1, seed=1) as srv:
        new = collect(sql_tasks, policy(srv), tmp_path, samples=2, show_progress=False,
                      scale=CollectConfig(concurrency=16, retries=4, **FAST))
        injected, requests = dict(srv.injected), srv.requests
    assert len(new) == 200 and sum(injected.values()) >= 0.07 * requests  # ~10% really injected
    tiers = Counter(t.outcome.tier for t in new)
    assert tiers["success"] >= 0.99 * len(new), tiers
    # Every injected fault is on some trajectory, labelled by kind; retries are counted per step.
    recorded = Counter(f.kind for t in new for f in t.faults)
    assert recorded == Counter({KIND[k]: n for k, n in injected.items()})
    assert sum(s.retries for t in new for s in t.steps) == sum(f.retried for t in new for f in t.faults)
    assert all(f.step is not None and f.elapsed_s >= 0 for t in new for f in t.faults)
    # The store holds the same, graded, with the sampling config in each record.
    stored = TrajectoryStore(tmp_path).read()
    assert len(stored) == 200 and all(t.sampling is not None for t in stored)

    # Without retries the same faults end episodes: env_fault, never a training negative.
    with OpenAIServer(sql_tasks[:40], fault_rate=0.3, seed=2) as srv:
        trajs = [graded(t) for t in run_concurrent(
            sql_tasks[:40], policy(srv), cfg=CollectConfig(concurrency=8, retries=0, **FAST))]
    faulted = [t for t in trajs if t.outcome.tier == "env_fault"]
    assert faulted and all(t.end == "env_fault" for t in faulted)
    assert {t.outcome.fail_reason for t in faulted} <= set(KIND.values())
    assert all(t.faults[-1].kind == t.outcome.fail_reason and not t.faults[-1].retried for t in faulted)
    metrics = evaluate(trajs)
    assert metrics["env_faults"] == len(faulted)  # reported, and left out of the rates
    from trajforge.train.sft import SFTConfig, select
    kept, skipped = select(trajs, SFTConfig())
    assert not any(t.outcome.tier == "env_fault" for t in kept) and skipped["tier:env_fault"] == len(faulted)


def test_model_mistakes_are_fed_back_never_retried(sql_tasks):
    bad = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "run_sql", "arguments": '{"sql": 1}'}}]}
    with OpenAIServer(script=lambda body: bad) as srv:
        trajs = run_concurrent(sql_tasks[:5], policy(srv), HarnessConfig(max_consecutive_errors=2),
                                 CollectConfig(concurrency=5, **FAST))
        assert srv.requests == 10  # two turns per episode, no retry
    assert all(t.end == "max_errors" and t.faults == [] and graded(t).outcome.tier == "failed"
               for t in trajs)
    assert all(s.retries == 0 and s.errors[0].kind == "invalid_args" for t in trajs for s in t.steps)


def test_a_collection_ends_the_environment_threads_it_started(sql_tasks):
    """The executor a run builds for itself ends its worker threads when the run ends: each
    ``run_concurrent`` (an RFT round, an in-loop eval) used to leave up to 256 idle ones behind."""
    import threading

    def env_threads():
        return {t for t in threading.enumerate() if t.name == "trajforge-env"}

    before = env_threads()
    with OpenAIServer(sql_tasks) as srv:
        trajs = run_concurrent(sql_tasks[:8], policy(srv), cfg=CollectConfig(concurrency=4, **FAST))
    assert len(trajs) == 8
    left = env_threads() - before
    for t in left:
        t.join(timeout=5)
    assert [t for t in left if t.is_alive()] == []


def test_server_that_stops_answering_ends_episodes_by_their_deadline(sql_tasks):
    with OpenAIServer(sql_tasks, hang=True) as srv:
        t0 = time.perf_counter()
        # The request deadline fires first (0.4 s, one retry) ...
        by_request = run_concurrent(sql_tasks[:6], policy(srv), cfg=CollectConfig(
            concurrency=6, request_timeout_s=0.4, retries=1, episode_timeout_s=3, **FAST))
        # ... or, with a generous request deadline, the episode's own.
        by_episode = run_concurrent(sql_tasks[:6], policy(srv), cfg=CollectConfig(
            concurrency=6, request_timeout_s=60, episode_timeout_s=1.0, **FAST))
        elapsed = time.perf_counter() - t0
    for t in by_request:
        assert t.end == "env_fault" and graded(t).outcome.fail_reason == "request_timeout"
        assert [f.retried for f in t.faults] == [True, False] and t.wall_s < 3 + 5
    for t in by_episode:
        assert graded(t).outcome.fail_reason == "episode_timeout" and t.wall_s < 1.0 + 5
    assert elapsed < 2 * 5  # the hung requests never blocked the run


def test_hanging_tool_ends_its_episode_and_blocks_nothing_else(sql_tasks):
    hang = [faulty_task(i, "wait") for i in range(4)]
    pool = hang + list(sql_tasks[:8])
    executor = AsyncioExecutor(factory)
    with OpenAIServer(pool) as srv:
        t0 = time.perf_counter()
        trajs = run_concurrent(pool, policy(srv), cfg=CollectConfig(concurrency=2, tool_timeout_s=0.5,
                                                                         episode_timeout_s=20),
                                 executor=executor)
        elapsed = time.perf_counter() - t0
    by_id = {t.task_id: graded(t) for t in trajs}
    for task in hang:
        t = by_id[task.id]
        assert t.outcome.tier == "env_fault" and t.outcome.fail_reason == "tool_timeout"
        assert t.wall_s < 0.5 + 5 and t.steps[0].calls[0].name == "wait" and t.steps[0].results == []
    # Both slots met hung tools first; the SQL episodes behind them still all succeeded.
    assert all(by_id[t.id].outcome.tier == "success" for t in sql_tasks[:8])
    assert executor.threads.abandoned == 4 and elapsed < 15


def test_hung_tool_thread_does_not_keep_the_process_alive(tmp_path):
    script = textwrap.dedent("""
        from tests.harness.toy_envs import factory, faulty_task
        from tests.openai_server import OpenAIServer
        from trajforge.harness import AsyncioExecutor, CollectConfig, run_concurrent
        from trajforge.policies import make_policy
        pool = [faulty_task(0, "wait")]
        with OpenAIServer(pool) as srv:
            [t] = run_concurrent(pool, make_policy(f"openai:{srv.url}#m"),
                                   cfg=CollectConfig(tool_timeout_s=0.3), executor=AsyncioExecutor(factory))
        print(t.faults[-1].kind)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30,
                         cwd=Path(__file__).parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "tool_timeout"


def test_crashed_tools_and_failed_starts_are_retried(sql_tasks):
    pool = [faulty_task(0, "flaky"), faulty_task(1, "flaky")]
    with OpenAIServer(pool) as srv:
        FaultyEnv.crashes, FaultyEnv.failing_starts = 1, 1
        ok = run_concurrent(pool, policy(srv), cfg=CollectConfig(concurrency=1, **FAST),
                              executor=AsyncioExecutor(factory))
        FaultyEnv.crashes = 100
        bad = run_concurrent(pool[:1], policy(srv), cfg=CollectConfig(retries=2, **FAST),
                               executor=AsyncioExecutor(factory))
    assert all(graded(t).outcome.tier == "success" for t in ok)
    kinds = [(f.kind, f.retried) for t in ok for f in t.faults]
    assert sorted(kinds) == [("env_start", True), ("tool_crash", True)]
    [t] = bad
    assert graded(t).outcome.fail_reason == "tool_crash"
    assert [f.retried for f in t.faults] == [True, True, False] and t.steps[0].results[0].fault


def test_episode_clock_starts_with_its_slot(sql_tasks):
    pool = [t for t in sql_tasks if len(t.reference) <= 3][:5]
    with OpenAIServer(pool, latency_s=0.2) as srv:
        t0 = time.perf_counter()
        trajs = run_concurrent(pool, policy(srv), cfg=CollectConfig(concurrency=1, episode_timeout_s=1.5))
        elapsed = time.perf_counter() - t0
    assert elapsed > 1.5  # the last episodes waited longer than the deadline for their slot ...
    assert all(graded(t).outcome.tier == "success" and t.faults == [] for t in trajs)  # ... in vain


def test_backoff_is_exponential_capped_jittered_and_honours_retry_after():
    cfg = CollectConfig(backoff_s=1.0, backoff_max_s=5.0)
    rng = random.Random(0)
    for attempt, base in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 5.0), (9, 5.0)]:
        delays = [backoff_delay(attempt, cfg, rng=rng) for _ in range(200)]
        assert base / 2 <= min(delays) and max(delays) <= base and max(delays) - min(delays) > base / 4
    assert backoff_delay(0, cfg, retry_after_s=3.0, rng=rng) >= 3.0
    assert backoff_delay(0, cfg, retry_after_s=60.0, rng=rng) <= 5.0


def test_event_log_records_requests_tools_and_what_was_in_flight(sql_tasks, tmp_path):
    with OpenAIServer(sql_tasks[:4]) as srv:
        collect(sql_tasks[:4], policy(srv), tmp_path, show_progress=False)
    events = list(read_events(tmp_path))
    evs = Counter(e["ev"] for e in events)
    turns = sum(len(t.steps) for t in TrajectoryStore(tmp_path))
    assert evs["run_start"] == evs["run_end"] == 1 and evs["episode_end"] == 4
    assert evs["request"] == evs["request_start"] == turns and evs["tool"] == evs["tool_start"] >= turns
    assert all(e["status"] == "ok" and e["latency_s"] >= 0 for e in events if e["ev"] in ("request", "tool"))
    assert interrupted_runs(tmp_path) == []
    # A run killed mid-episode leaves starts without ends; the next run can say what was in flight.
    log = EventLog(tmp_path / "logs" / "shard-9.jsonl", run="killed")
    log.write("run_start")
    log.write("episode_start", key="a#0")
    log.write("request_start", key="a#0", turn=0, attempt=0)
    log.write("episode_start", key="b#0")
    log.write("tool_start", key="b#0", turn=0, name="run_sql")
    log.write("episode_start", key="c#0")
    log.write("episode_end", key="c#0", end="submitted")
    log.close()
    [r] = interrupted_runs(tmp_path)
    assert (r.run, r.episodes, r.requests, r.tool_calls) == ("killed", ["a#0", "b#0"], 1, 1)
    # Once a later run finishes, the killed one is history (its episodes were resumed).
    log = EventLog(tmp_path / "logs" / "shard-9.jsonl", run="later")
    log.write("run_start")
    log.write("run_end", done=2)
    log.close()
    assert interrupted_runs(tmp_path) == []


def test_retry_faults_reruns_only_env_fault_episodes_and_the_success_supersedes(sql_tasks, tmp_path):
    pool = sql_tasks[:30]  # a policy's name is part of the key: keep it across server restarts
    with OpenAIServer(pool, fault_rate=0.3, seed=5) as srv:
        first = collect(pool, policy(srv, name="server"), tmp_path, show_progress=False,
                        scale=CollectConfig(concurrency=8, retries=0, **FAST))
    faulted = {t.task_id for t in first if t.outcome.tier == "env_fault"}
    assert faulted and len(faulted) < len(pool)
    with OpenAIServer(pool) as srv:
        assert collect(pool, policy(srv, name="server"), tmp_path, show_progress=False) == []  # faults count as done
        again = collect(pool, policy(srv, name="server"), tmp_path, show_progress=False, retry_faults=True)
    assert {t.task_id for t in again} == faulted and all(t.outcome.tier == "success" for t in again)
    store = TrajectoryStore(tmp_path)
    assert len(store.read()) == len(pool) and store.duplicates == len(faulted)
    assert all(t.outcome.tier == "success" for t in store.read())


def test_episode_deadline_cuts_a_hung_tool_and_abandons_its_thread():
    pool = [faulty_task(0, "wait")]
    executor = AsyncioExecutor(factory)
    with OpenAIServer(pool) as srv:
        t0 = time.perf_counter()
        [t] = run_concurrent(pool, policy(srv), executor=executor,
                               cfg=CollectConfig(tool_timeout_s=60, episode_timeout_s=1.0))
        elapsed = time.perf_counter() - t0
    assert graded(t).outcome.fail_reason == "episode_timeout" and t.steps[0].calls[0].name == "wait"
    # The environment is busy on its thread: abandoned at once, not closed after a wait.
    assert executor.threads.abandoned == 1 and elapsed < 1.0 + 2.5


def test_a_sync_policy_stuck_past_the_episode_deadline_holds_up_nothing():
    """A sync policy runs on a daemon thread: one stuck past its episode's deadline ends that
    episode on time, and the run returns without waiting for the call (``to_thread``'s pool
    threads are joined when the run's loop closes, which held the run for the whole call)."""
    from trajforge.policies.scripted import ScriptedPolicy

    release = threading.Event()

    class Stuck(ScriptedPolicy):
        def act(self, requests):
            if requests[0].task.id == "faulty-0":
                release.wait(10)
            return super().act(requests)

    pool = [faulty_task(0), faulty_task(1)]
    t0 = time.perf_counter()
    trajs = run_concurrent(pool, Stuck(lambda req: '<tool_call>{"name": "submit_answer", "arguments": '
                                                   '{"answer": "42"}}</tool_call>'),
                           executor=AsyncioExecutor(factory), cfg=CollectConfig(episode_timeout_s=0.5))
    elapsed = time.perf_counter() - t0
    release.set()
    got = {t.task_id: graded(t).outcome for t in trajs}
    assert got["faulty-0"].fail_reason == "episode_timeout" and got["faulty-1"].tier == "success"
    assert elapsed < 3
