"""Run policies on tasks in the harness, grade, store and summarize.

``collect`` is what ``trajforge collect`` calls: resumable (episodes whose idempotency key is
already in the store are skipped), every episode graded and appended as it ends, at scale through
the async harness (``trajforge.harness.concurrent``) when the policy is a server.
``compare`` runs several policies on the same tasks and returns ``{policy name: metrics}``, which
``metrics_of`` computes from a store (also one that several ``--shard`` workers filled).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trajforge._compat import moved_names
from trajforge.eval.metrics import evaluate
from trajforge.grade import RewardConfig, graded
from trajforge.harness import (CollectConfig, Executor, HarnessConfig, run_concurrent, run_episodes,
                               sampling_of)
from trajforge.harness.events import EventLog, log_path
from trajforge.harness.progress import collect_progress
from trajforge.policies import Policy
from trajforge.schema import SamplingConfig, Task, Trajectory
from trajforge.store import TrajectoryStore, resume_keys
from trajforge.store.jsonl import is_fault, key_of, sampling_digest


def collect(tasks: list[Task], policy: Policy, store_dir: str | Path, samples: int = 1,
            harness: HarnessConfig | None = None, rewards: RewardConfig | None = None,
            show_progress: bool = True, scale: CollectConfig | None = None,
            executor: str | Executor = "asyncio", retry_faults: bool = False,
            first_shard: int = 0) -> list[Trajectory]:
    """Run, grade and append every missing (task, sample) episode; return the new trajectories.

    Policies that answer one episode at a time (``act_one``: OpenAI-compatible servers), and any
    run on the Ray executor, go through the async harness with ``scale``'s concurrency, deadlines
    and retries; batch policies (local HF, expert, scripted) through the batched loop. Either way
    this process claims a store shard of its own and appends each graded episode as it ends.
    ``retry_faults`` also reruns episodes the store has only as ``env_fault``. ``first_shard``:
    the lowest shard number to claim (a ``--shard I/N`` worker's I).
    """
    store = TrajectoryStore(store_dir)
    sampling = sampling_of(policy)
    skip = store.stored(policy.name, sampling, faults=not retry_faults)

    todo = sum(1 for t in tasks for s in range(samples) if not skip(t, s))
    new: list[Trajectory] = []
    scaled = hasattr(policy, "act_one") or executor != "asyncio"
    with store.writer(background=scaled, first=first_shard) as shard, \
            collect_progress(f"collect {policy.name}"[:40], todo, show_progress) as tally:
        def done(traj: Trajectory) -> None:
            traj.sampling = sampling
            g = graded(traj, rewards)
            shard.append(g)
            new.append(g)
            tally.done(g.outcome.tier, sum(f.retried for f in g.faults))

        if not scaled:
            run_episodes(tasks, policy, harness, samples=samples, on_done=done, skip=skip)
            return new
        log = EventLog(log_path(store_dir, shard.name))
        try:
            run_concurrent(tasks, policy, harness, scale, samples=samples, executor=executor,
                             on_done=done, skip=skip, log=log)
        finally:
            log.close()
    return new


def compare(tasks: list[Task], policies: list[Policy], store_dir: str | Path,
            harness: HarnessConfig | None = None, show_progress: bool = True) -> dict[str, Any]:
    """Evaluate each policy on the same tasks in the same harness: ``{name: metrics}``."""
    for policy in policies:
        collect(tasks, policy, store_dir, harness=harness, show_progress=show_progress)
    return metrics_of(store_dir, tasks, [p.name for p in policies], {p.name: sampling_of(p) for p in policies})


def metrics_of(store_dir: str | Path, tasks: list[Task], names: list[str],
               sampling: dict[str, SamplingConfig] | None = None) -> dict[str, Any]:
    """``{name: metrics}`` of the first sample of each task for each named policy in a store.

    ``sampling`` (by name) picks the run at those settings: the store keys episodes by sampling
    too, so one policy's greedy run and its T = 0.7 run both have a sample 0 of each task, and
    counting both counted every task twice. A named policy without settings there must have been
    stored at one only, or this raises ``ValueError`` naming them.
    The episodes are taken in pool order whichever shard holds them, so a collection spread over
    several processes (each its own shard) gives the very numbers of a one-process run."""
    order = {t.id: i for i, t in enumerate(tasks)}
    wanted = sampling or {}
    mine: dict[str, dict[str, Trajectory]] = {name: {} for name in names}
    seen: dict[str, set[str]] = {name: set() for name in names}
    for t in TrajectoryStore(store_dir):
        if t.policy not in mine or t.task_id not in order or t.sample != 0:
            continue
        if t.policy in wanted and key_of(t) not in resume_keys(t.task_id, t.policy, 0, wanted[t.policy]):
            continue
        seen[t.policy].add(sampling_digest(t.sampling or SamplingConfig()))  # no record: greedy
        kept = mine[t.policy].get(t.task_id)  # an old-style key and its greedy twin count once
        if kept is None or (is_fault(kept) and not is_fault(t)):
            mine[t.policy][t.task_id] = t
    mixed = [name for name in names if name not in wanted and len(seen[name]) > 1]
    if mixed:
        raise ValueError(f"{store_dir} holds episodes of {', '.join(mixed)} at several sampling settings; "
                         "name the settings to count (metrics_of's sampling), or use one store per setting")
    return {name: evaluate(sorted(trajs.values(), key=lambda t: order[t.task_id])) for name, trajs in mine.items()}


__getattr__ = moved_names(__name__, {"collect_episodes": "trajforge.harness.concurrent:run_concurrent"})
