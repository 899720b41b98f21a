"""A pool mixing sql and travel tasks: storage, episodes, grading and metrics all per task."""

from __future__ import annotations

from collections import Counter

import pytest

from trajforge.envs import env_class
from trajforge.eval.run import collect
from trajforge.harness import run_episodes
from trajforge.policies.expert import ExpertPolicy
from trajforge.store import TrajectoryStore
from trajforge.tasks import read_tasks, write_tasks
from trajforge.tasks.mixed import mixed_pool


@pytest.fixture(scope="module")
def pool():
    return mixed_pool({"sql": 20, "travel": 20}, seed=1)


def test_mixed_pool_interleaves_envs_in_every_split(pool):
    tasks = pool.tasks
    assert Counter(t.env for t in tasks) == {"sql": 20, "travel": 20}
    splits = [t.split for t in tasks]
    assert splits == sorted(splits, key=("train", "test", "heldout").index)
    for split in ("train", "test", "heldout"):
        envs = [t.env for t in tasks if t.split == split]
        assert set(envs[:2]) == {"sql", "travel"}  # any prefix covers both
    assert all(":" in k for k in pool.dropped)


def test_mixed_pool_round_trips_jsonl(pool, tmp_path):
    path = write_tasks(tmp_path / "mixed.jsonl", pool.tasks)
    back = read_tasks(path)
    assert back == pool.tasks
    assert {type(t.expected).__name__ for t in back} >= {"dict"}  # travel's booking specs


def test_expert_solves_a_mixed_pool_and_grading_is_per_env(pool, tmp_path):
    trajs = run_episodes(pool.tasks, ExpertPolicy())
    assert all(t.verdict.correct for t in trajs)
    by_id = {t.id: t for t in pool.tasks}
    for traj in trajs:
        task = by_id[traj.task_id]
        assert traj.env == task.env
        assert traj.toolset_fingerprint == env_class(task.env).toolset().fingerprint
    assert len({t.toolset_fingerprint for t in trajs}) == 2
    graded = collect(pool.tasks, ExpertPolicy(), tmp_path / "store", show_progress=False)
    assert all(t.outcome.tier == "success" for t in graded)
    stored = TrajectoryStore(tmp_path / "store").read()
    assert Counter(t.env for t in stored) == {"sql": 20, "travel": 20}


def test_bad_specs_are_refused():
    with pytest.raises(ValueError, match="at least one environment"):
        mixed_pool({}, seed=0)
    with pytest.raises(ValueError, match="no task generator for environment 'nope'"):
        mixed_pool({"nope": 3}, seed=0)
