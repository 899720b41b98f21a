"""``collect`` / ``eval`` with ``--processes N`` and ``--shard I/N``, in real worker processes.

A tiny random llama built from a config (``tests/tiny.py``), greedy decoding in fp32: what N
workers store is exactly what one process stores, each worker wrote a shard of its own, a rerun
collects nothing, ``eval`` merges the workers' episodes into the one-process metrics, slices are
disjoint and cover the pool, and a worker that fails or is killed is named, with the others'
episodes kept and a rerun redoing only what is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.tiny import build_tiny_model
from trajforge.cli.main import app
from trajforge.store import TrajectoryStore
from trajforge.store.jsonl import key_of
from trajforge.tasks import synthesize, write_tasks
from trajforge.tasks.slices import Slice

runner = CliRunner()
KILL_HOOK = Path(__file__).parents[1] / "fixtures" / "kill_rank"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    tasks = synthesize("sql", 12, seed=3).tasks[:7]  # 7: the slices differ in size (4 and 3)
    return tasks, write_tasks(tmp_path_factory.mktemp("pool") / "tasks.jsonl", tasks)


@pytest.fixture(autouse=True)
def _fp32(monkeypatch):
    # Greedy decoding is batch-independent in fp32 (tests/policies/test_hf.py); a CPU with native
    # bf16 would otherwise pick bf16, where batch composition can flip a near-tied token.
    monkeypatch.setenv("TRAJFORGE_DTYPE", "float32")


def cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``trajforge ARGS`` in a fresh process: ``--processes`` reruns a real command line. (The
    timeout only guards against a hang: ~10-20 s is typical, but a shared CPU can be slow.)"""
    return subprocess.run([sys.executable, "-m", "trajforge.cli.main", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def tiny_policy(model) -> str:
    """The tiny model, 32 new tokens a turn: random weights never stop on their own, and what
    these tests compare is who collected what, not how long a reply is (160 tokens, the default,
    made them the suite's slowest)."""
    return f"hf:{model}?max_tokens=32"


def collect_args(path, model, out, *more):
    return ["collect", "--tasks", str(path), "--policy", tiny_policy(model), "--out", str(out),
            "--max-turns", "2", *more]


def episodes(store) -> dict[str, tuple]:
    """key → what the episode was: its outcome and every token the model sampled."""
    return {key_of(t): (t.outcome.tier, t.outcome.fail_reason, [s.completion_ids for s in t.steps])
            for t in TrajectoryStore(store)}


@pytest.mark.slow
def test_two_workers_store_what_one_process_stores_each_in_its_own_shard(pool, model, tmp_path):
    tasks, path = pool
    one = runner.invoke(app, collect_args(path, model, tmp_path / "one"))
    assert one.exit_code == 0, one.output
    two = cli(*collect_args(path, model, tmp_path / "two", "--processes", "2"))
    assert two.returncode == 0, two.stdout + two.stderr
    out = " ".join(two.stdout.split())
    assert "worker 0 (shard 0/2, cpu): 4 new episodes" in out or "worker 0 (shard 0/2, cuda:0): 4 new" in out
    assert "worker 1 (shard 1/2," in out and "): 3 new episodes" in out
    assert "collected 7 new episodes into" in out and "over 2 processes" in out

    expected = episodes(tmp_path / "one")
    assert len(expected) == 7 and episodes(tmp_path / "two") == expected
    # Each worker appended to a shard of its own, holding exactly its slice's tasks.
    shards = sorted((tmp_path / "two").glob("*.jsonl"))
    assert [s.name for s in shards] == ["shard-0.jsonl", "shard-1.jsonl"]
    held = sorted(sorted(t.task_id for t in TrajectoryStore(s)) for s in shards)
    assert held == sorted(sorted(t.id for t in Slice(i, 2).of(tasks)) for i in range(2))

    before = [s.read_bytes() for s in shards]
    again = cli(*collect_args(path, model, tmp_path / "two", "--processes", "2"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "collected 0 new episodes" in again.stdout
    assert [s.read_bytes() for s in shards] == before


@pytest.mark.slow
def test_eval_over_two_workers_gives_the_one_process_metrics(pool, model, tmp_path):
    tasks, path = pool
    args = ["eval", "--tasks", str(path), "--policy", tiny_policy(model), "--policy", "expert",
            "--name", "tiny", "--split", "", "--max-turns", "2"]
    one = runner.invoke(app, [*args, "--json", str(tmp_path / "one.json")])
    assert one.exit_code == 0, one.output
    two = cli(*args, "--processes", "2", "--json", str(tmp_path / "two.json"), "--store", str(tmp_path / "st"))
    assert two.returncode == 0, two.stdout + two.stderr
    expected = json.loads((tmp_path / "one.json").read_text())
    assert set(expected) == {"tiny", "expert"} and expected["expert"]["completion"] == 1.0
    assert json.loads((tmp_path / "two.json").read_text()) == expected
    # Worker I claims shard-I first, so each slice lands in its own shard whatever the timing
    # (from shard-0, a worker that closed its writer early left it for the other: seen under load).
    shards = sorted((tmp_path / "st").glob("*.jsonl"))
    assert [s.name for s in shards] == ["shard-0.jsonl", "shard-1.jsonl"]
    held = [sorted({t.task_id for t in TrajectoryStore(s)}) for s in shards]
    assert held == [sorted(t.id for t in Slice(i, 2).of(tasks)) for i in range(2)]
    assert len(TrajectoryStore(tmp_path / "st").read()) == 14
    # Each worker ran both policies on its slice: 4 and 3 tasks, two episodes each.
    out = " ".join(two.stdout.split())
    assert ": 8 new episodes" in out and ": 6 new episodes" in out


def test_eval_over_workers_counts_their_run_not_another_sampling_in_the_store(pool, tmp_path):
    """The parent computes the metrics from the store: it must count the workers' greedy run, not
    also a T = 0.7 run of the same policy name stored there before (every task twice)."""
    from trajforge.eval.run import collect
    from trajforge.policies import make_policy
    from trajforge.schema import SamplingConfig

    tasks, path = pool
    warm = make_policy("expert")
    warm.sampling = SamplingConfig(temperature=0.7)
    collect(tasks, warm, tmp_path / "st", show_progress=False)
    res = cli("eval", "--tasks", str(path), "--policy", "expert", "--split", "", "--processes", "2",
              "--store", str(tmp_path / "st"), "--json", str(tmp_path / "m.json"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads((tmp_path / "m.json").read_text())["expert"]["n"] == len(tasks)


def test_shard_slices_are_disjoint_and_cover_the_pool(pool, tmp_path):
    tasks, path = pool
    seen = []
    for i in range(3):
        res = runner.invoke(app, ["collect", "--tasks", str(path), "--policy", "expert",
                                  "--out", str(tmp_path / f"s{i}"), "--shard", f"{i}/3"])
        assert res.exit_code == 0, res.output
        seen.append({t.task_id for t in TrajectoryStore(tmp_path / f"s{i}")})
        # Slice I's episodes go to shard-I (a cluster's array job I writes its own file).
        assert [p.name for p in (tmp_path / f"s{i}").glob("*.jsonl")] == [f"shard-{i}.jsonl"]
    assert [len(s) for s in seen] == [3, 2, 2]
    assert set.union(*seen) == {t.id for t in tasks} and sum(map(len, seen)) == len(tasks)
    # A slice collected by hand counts as done for a later run over the whole pool.
    res = runner.invoke(app, ["collect", "--tasks", str(path), "--policy", "expert",
                              "--out", str(tmp_path / "s0"), "--shard", "0/1"])
    assert "collected 4 new episodes" in res.output
    bad = runner.invoke(app, ["collect", "--tasks", str(path), "--policy", "expert",
                              "--out", str(tmp_path / "x"), "--shard", "3/3"])
    assert bad.exit_code == 2 and "expected I/N with 0 <= I < N" in bad.output


def test_a_killed_worker_is_named_the_other_keeps_its_episodes_and_a_rerun_fills_the_gap(pool, tmp_path):
    tasks, path = pool
    out = tmp_path / "store"
    # The worker with LOCAL_RANK 1 dies of SIGKILL as its interpreter starts (tests/fixtures/kill_rank).
    # The expert policy: how a worker ends does not depend on the policy, and it loads no model.
    args = ["collect", "--tasks", str(path), "--policy", "expert", "--out", str(out), "--processes", "2"]
    kill = {"PYTHONPATH": str(KILL_HOOK), "TRAJFORGE_TEST_KILL_RANK": "1"}
    res = cli(*args, env=kill)
    text = " ".join((res.stdout + res.stderr).split())
    assert res.returncode == 1, text
    assert "worker 1 (shard 1/2) failed: killed by SIGKILL" in text and "worker-1-of-2.log" in text
    assert "1 of 2 workers failed; the 4 new episodes the others collected are in" in text
    assert {t.task_id for t in TrajectoryStore(out)} == {t.id for t in Slice(0, 2).of(tasks)}

    res = cli(*args)
    assert res.returncode == 0, res.stdout + res.stderr
    text = " ".join(res.stdout.split())
    assert ": 0 new episodes" in text and ": 3 new episodes" in text
    assert {t.task_id for t in TrajectoryStore(out)} == {t.id for t in tasks}


def test_a_worker_that_fails_is_named_with_its_error(pool, tmp_path):
    tasks, _ = pool
    # The second task names an environment this install lacks: only worker 1's slice holds it.
    broken = [tasks[0], tasks[1].model_copy(update={"env": "no-such-env"}), *tasks[2:4]]
    path = write_tasks(tmp_path / "tasks.jsonl", broken)
    res = cli("collect", "--tasks", str(path), "--policy", "expert", "--out", str(tmp_path / "st"),
              "--processes", "2")
    text = " ".join((res.stdout + res.stderr).split())
    assert res.returncode == 1, text
    assert "worker 1 (shard 1/2) failed: exit status 2: error:" in text and "no-such-env" in text
    assert "worker 0 (shard 0/2, -): 2 new episodes" in text
    assert {t.task_id for t in TrajectoryStore(tmp_path / "st")} == {tasks[0].id, tasks[2].id}
