"""`trajforge collect` at scale against a loopback server: options, resume, and a SIGKILL torture run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.openai_server import OpenAIServer
from trajforge.cli.main import app
from trajforge.harness.events import interrupted_runs
from trajforge.store import TrajectoryStore
from trajforge.tasks import synthesize
from trajforge.tasks.pool import write_tasks

ROOT = Path(__file__).parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    tasks = synthesize("sql", 100, seed=5).tasks
    path = tmp_path_factory.mktemp("pool") / "tasks.jsonl"
    write_tasks(path, tasks)
    return tasks, path


def args(path, url, out, *more):
    return ["collect", "--tasks", str(path), "--policy", f"openai:{url}#m", "--out", str(out), *more]


def test_collect_options_resume_and_zero_calls_on_rerun(pool, tmp_path):
    tasks, path = pool
    with OpenAIServer(tasks) as srv:
        res = runner.invoke(app, args(path, srv.url, tmp_path, "--samples", "2", "--concurrency", "16",
                                      "--request-timeout", "5", "--tool-timeout", "5",
                                      "--episode-timeout", "60", "--retries", "2"))
        assert res.exit_code == 0, res.output
        assert "collected 200 new episodes" in res.output and "'success': 200" in res.output
        calls = srv.requests
        res = runner.invoke(app, args(path, srv.url, tmp_path, "--samples", "2", "--resume"))
        assert res.exit_code == 0 and "collected 0 new episodes" in res.output
        assert "no interrupted run" in res.output
        assert srv.requests == calls  # a finished collection makes no model call
        # Another sampling config is another set of episodes.
        res = runner.invoke(app, args(path, srv.url, tmp_path, "--temperature", "0.5"))
        assert "collected 100 new episodes" in res.output
    assert len(TrajectoryStore(tmp_path).read()) == 300
    assert (tmp_path / "logs" / "shard-0.jsonl").exists()


@pytest.mark.parametrize("bad, message", [
    (["--executor", "dask"], "--executor must be asyncio or ray"),
    (["--concurrency", "0"], "--concurrency: Input should be greater than or equal to 1"),
    (["--tool-timeout", "-1"], "--tool-timeout: Input should be greater than 0"),
])
def test_bad_options_are_named(pool, tmp_path, bad, message):
    res = runner.invoke(app, args(pool[1], "http://127.0.0.1:9/v1", tmp_path, *bad))
    assert res.exit_code == 2 and message in " ".join(res.output.split())
    assert not (tmp_path / "logs").exists()


@pytest.mark.slow
def test_sigkill_at_20_random_moments_then_resume_gives_each_episode_once(tmp_path):
    tasks = synthesize("sql", 100, seed=7).tasks
    path = tmp_path / "tasks.jsonl"
    write_tasks(path, tasks)
    out = tmp_path / "store"
    rng = random.Random(0)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = out / "logs" / "shard-0.jsonl"
    # 50 ms per request at concurrency 4 caps the pace near 25 episodes/s, so the whole collection
    # needs over 10 s of running time: 20 kills at most 0.8 s into each run all land mid-way.
    with OpenAIServer(tasks, latency_s=0.05) as srv:
        cmd = [sys.executable, "-m", "trajforge.cli.main",
               *args(path, srv.url, out, "--samples", "3", "--concurrency", "4")]
        progress = []
        for _ in range(20):
            logged = log.stat().st_size if log.exists() else 0
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 30
            while proc.poll() is None and time.monotonic() < deadline:  # wait for run_start
                if log.exists() and log.stat().st_size > logged:
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.8))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            progress.append(sum(1 for _ in TrajectoryStore(out).records()))
        final = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=120)
        assert final.returncode == 0, final.stderr
        calls = srv.requests
        again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert "collected 0 new episodes" in again.stdout and srv.requests == calls
    # The kills landed mid-collection, not before or after it.
    assert sum(0 < n < 300 for n in progress) >= 15 and progress == sorted(progress), progress
    assert "resume: run" in final.stdout and "episodes in flight" in " ".join(final.stdout.split())
    store = TrajectoryStore(out)
    records = list(store.records())
    keys = [(t.task_id, t.sample) for t in records]
    assert len(keys) == 300 and len(set(keys)) == 300  # exactly once each, even in the raw shards
    assert len(store.torn) <= 20 and all(t.outcome.tier == "success" for t in records)
    assert interrupted_runs(out) == []  # the finished run closed the books on the killed ones
    assert [p.name for p in store.shards()] == ["shard-0.jsonl"]  # each run reclaimed the shard
    json.loads((out / "logs" / "shard-0.jsonl").read_text().splitlines()[-1])  # log is readable


def test_collect_repair_policy_makes_recovered_demonstrations(pool, tmp_path):
    """``--policy repair``: the expert with a mistake first; ``--mistakes-from`` needs it."""
    tasks, path = pool
    small = tmp_path / "small.jsonl"
    write_tasks(small, [t for t in tasks if t.split == "train"][:5])
    out = tmp_path / "store"
    res = runner.invoke(app, ["collect", "--tasks", str(small), "--policy", "repair", "--samples", "2",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    trajs = TrajectoryStore(out).read()
    assert len(trajs) == 10 and {t.outcome.tier for t in trajs} == {"recovered"}
    assert all(any(s.mistake for s in t.steps) for t in trajs) and {t.policy for t in trajs} == {"repair"}
    res = runner.invoke(app, ["collect", "--tasks", str(small), "--policy", "expert", "--out", str(out),
                              "--mistakes-from", str(out)])
    assert res.exit_code == 2 and "--policy repair" in res.output
    res = runner.invoke(app, ["collect", "--tasks", str(small), "--policy", "repair", "--out", str(tmp_path / "s2"),
                              "--mistakes-from", str(out)])
    assert res.exit_code == 0 and "0 refused turns" in " ".join(res.output.split())  # its own are not measured


def test_a_rerun_under_other_harness_settings_is_refused_by_name(pool, tmp_path):
    """The resume key holds no harness settings: a rerun with another ``--max-turns`` skipped every
    finished episode, printed "0 new" and left the store mixing two limits. Refused per policy: the
    same store takes another policy's episodes under other settings (DPO's samples + expert)."""
    tasks, path = pool
    small = tmp_path / "small.jsonl"
    write_tasks(small, [t for t in tasks if t.split == "train"][:3])
    out = tmp_path / "store"
    base = ["collect", "--tasks", str(small), "--policy", "expert", "--out", str(out)]
    assert runner.invoke(app, base).exit_code == 0
    for more, said in ((["--max-turns", "1"], "max_turns None -> 1"),
                       (["--max-repeats", "5"], "max_repeats 2 -> 5")):
        res = runner.invoke(app, [*base, *more])
        text = " ".join(res.output.split())
        assert res.exit_code == 2 and f"holds episodes of expert run under other harness settings ({said})" in text
    again = runner.invoke(app, base)  # the same settings: resumes, nothing to run
    assert again.exit_code == 0 and "collected 0 new episodes" in again.output
    other = runner.invoke(app, [*base, "--name", "short", "--max-turns", "1"])
    assert other.exit_code == 0 and "collected 3 new episodes" in other.output, other.output
    assert len(TrajectoryStore(out).read()) == 6
