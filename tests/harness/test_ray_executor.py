"""The Ray executor against a local Ray instance: environments run in actors, faults come back typed."""

from __future__ import annotations

import os
import time

import pytest

ray = pytest.importorskip("ray", reason="the ray executor needs `pip install trajforge[ray]`")

from ray import cloudpickle  # noqa: E402  (the copy Ray pickles with)

import tests.harness.toy_envs as toy_envs  # noqa: E402
from tests.openai_server import OpenAIServer  # noqa: E402
from trajforge.grade import graded  # noqa: E402
from trajforge.harness import CollectConfig, run_concurrent  # noqa: E402
from trajforge.harness.ray_executor import RayExecutor  # noqa: E402
from trajforge.policies import make_policy  # noqa: E402
from trajforge.tasks import synthesize  # noqa: E402

pytestmark = pytest.mark.slow  # a local Ray instance takes ~5-10 s to start


@pytest.fixture(scope="module")
def local_ray():
    # Actors import trajforge from the installed package; the test-only environments travel by
    # value, as a user's own environment module would.
    cloudpickle.register_pickle_by_value(toy_envs)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    cloudpickle.unregister_pickle_by_value(toy_envs)


def test_environments_run_in_actors_and_a_hung_tool_ends_only_its_episode(local_ray):
    sql = synthesize("sql", 20, seed=4).tasks[:12]
    hang = [toy_envs.faulty_task(i, "wait") for i in range(2)]
    where = [toy_envs.faulty_task(10 + i, "pid") for i in range(4)]
    pool = hang + sql + where
    executor = RayExecutor(toy_envs.factory, workers=2)
    try:
        with OpenAIServer(pool) as srv:
            # Warm the actors first: their first environment start (imports, the generated
            # database) counts against the tool deadline and can take seconds on a loaded 2-core box.
            run_concurrent(sql[:2], make_policy(f"openai:{srv.url}#warm"), executor=executor,
                             cfg=CollectConfig(concurrency=2, tool_timeout_s=60.0))
            trajs = run_concurrent(pool, make_policy(f"openai:{srv.url}#m"), executor=executor,
                                     cfg=CollectConfig(concurrency=4, tool_timeout_s=3.0))
        for _ in range(50):  # abandoning is fire-and-forget: give the actors a moment
            stats = ray.get([a.stats.remote() for a in executor.actors])
            if sum(s["open"] for s in stats) == 0:
                break
            time.sleep(0.1)
    finally:
        import asyncio
        asyncio.run(executor.aclose())
    by_id = {t.task_id: graded(t) for t in trajs}
    assert all(by_id[t.id].outcome.tier == "success" for t in sql + where), [
        (t.task_id, t.outcome.fail_reason, t.faults) for t in by_id.values()]
    for t in hang:
        assert by_id[t.id].outcome.fail_reason == "tool_timeout" and by_id[t.id].wall_s < 3.0 + 5
    pids = {by_id[t.id].messages[3].content for t in where}
    assert str(os.getpid()) not in pids and len(pids) >= 1  # tools ran in actor processes
    # Every environment was closed or abandoned; the two stuck threads are the only casualties.
    assert sum(s["open"] for s in stats) == 0 and sum(s["abandoned_threads"] for s in stats) == 2


def test_collect_with_executor_ray_by_name(local_ray, tmp_path):
    from trajforge.eval.run import collect
    from trajforge.store import TrajectoryStore

    tasks = synthesize("sql", 20, seed=6).tasks[:6]
    with OpenAIServer(tasks) as srv:
        new = collect(tasks, make_policy(f"openai:{srv.url}#m"), tmp_path, executor="ray",
                      show_progress=False)
    assert [t.outcome.tier for t in new] == ["success"] * 6
    assert len(TrajectoryStore(tmp_path).read()) == 6


def test_an_environment_that_raises_in_an_actor_ends_only_its_episode_and_is_closed(local_ray):
    stages = ["execute", "verify", "none"]
    tasks = [toy_envs.broken_task(s, i) for s in stages for i in range(2)]
    executor = RayExecutor(toy_envs.factory, workers=2)
    try:
        with OpenAIServer(tasks) as srv:
            trajs = run_concurrent(tasks, make_policy(f"openai:{srv.url}#m"), executor=executor,
                                   cfg=CollectConfig(concurrency=4, tool_timeout_s=30.0))
        stats = ray.get([a.stats.remote() for a in executor.actors])
    finally:
        import asyncio
        asyncio.run(executor.aclose())
    reasons = sorted((t.task_id, graded(t).outcome.fail_reason) for t in trajs)
    assert reasons == sorted([(f"break-execute-{i}", "tool_crash") for i in range(2)]
                             + [(f"break-verify-{i}", "env_verify") for i in range(2)]
                             + [(f"break-none-{i}", None) for i in range(2)])
    # A call that raised returned: its environment was closed, no thread was given up on.
    assert sum(s["open"] for s in stats) == 0 and sum(s["abandoned_threads"] for s in stats) == 0
