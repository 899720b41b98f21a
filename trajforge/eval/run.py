"""Run policies on tasks in the harness, grade, store and summarize.

``collect`` is what ``trajforge collect`` calls: resumable (episodes whose idempotency key is
already in the store are skipped), every episode graded and appended as it ends.
``compare`` runs several policies on the same tasks and returns ``{policy name: metrics}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trajforge.eval.metrics import evaluate
from trajforge.grade import RewardConfig, graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.harness.progress import progress_bar
from trajforge.policies import Policy
from trajforge.schema import Task, Trajectory
from trajforge.store import TrajectoryStore, episode_key


def collect(tasks: list[Task], policy: Policy, store_dir: str | Path, samples: int = 1,
            harness: HarnessConfig | None = None, rewards: RewardConfig | None = None,
            show_progress: bool = True) -> list[Trajectory]:
    """Run, grade and append every missing (task, sample) episode; return the new trajectories."""
    store = TrajectoryStore(store_dir)
    have = store.keys()
    todo = sum(1 for t in tasks for s in range(samples)
               if episode_key(t.id, policy.name, s) not in have)

    def skip(task: Task, sample: int) -> bool:
        return episode_key(task.id, policy.name, sample) in have

    def done(traj: Trajectory) -> None:
        store.append(graded(traj, rewards))

    with progress_bar(f"collect {policy.name}", todo, show_progress) as advance:
        trajs = run_episodes(tasks, policy, harness, samples=samples, on_done=done, skip=skip,
                             progress=advance)
    return [graded(t, rewards) for t in trajs]


def compare(tasks: list[Task], policies: list[Policy], store_dir: str | Path,
            harness: HarnessConfig | None = None, show_progress: bool = True) -> dict[str, Any]:
    """Evaluate each policy on the same tasks in the same harness: ``{name: metrics}``."""
    results: dict[str, Any] = {}
    store = TrajectoryStore(store_dir)
    for policy in policies:
        collect(tasks, policy, store_dir, harness=harness, show_progress=show_progress)
        ids = {t.id for t in tasks}
        mine = [t for t in store if t.policy == policy.name and t.task_id in ids and t.sample == 0]
        results[policy.name] = evaluate(mine)
    return results
