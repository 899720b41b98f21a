"""Quality pools: what each graded episode is good for in training.

- ``positive`` — ``success`` and ``recovered`` episodes not marked ``guessed``: SFT demonstrations (``train sft --tiers
  success,recovered``); a recovered one trains with its failed and mistaken turns masked
  (``Trajectory.turn_learns``).
- ``partial`` — ``failed`` episodes that reached a milestone showing they got close (the
  environment's ``EnvSpec.progress``: SQL's ``found_answer``, code's ``tests_passed``) and still
  ended wrong: the tasks the policy almost solves, where the curriculum draws its GRPO tasks
  (``train/curriculum.Curriculum(partial=...)``). Environments that name none (tool lists, most
  plugins) count any milestone.
- ``negative`` — every ``failed`` episode (the partial ones too): DPO's rejected, against a correct
  episode of the same task (``train/dpo.build_pairs``).
- ``excluded`` — ``env_fault``, ``guessed`` (right by luck: no result held the answer), ungraded
  episodes and those whose grading raised (``grade_error``: failed in the rates, but whether the
  answer was right is unknown): infrastructure failures, lucky guesses and unknowns are never data.

    pools = quality_pools(TrajectoryStore("store/").read())
    print(pools.counts())
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, NamedTuple

from trajforge.envs.registry import graded_spec
from trajforge.harness.faults import GRADE_ERROR
from trajforge.schema import Trajectory

PoolName = Literal["positive", "partial", "negative", "excluded"]


def ungradable(traj: Trajectory) -> bool:
    """Grading raised (``grade.graded``): stored as ``failed`` so the rates count it against the
    episode, yet nobody knows whether its answer was right, so it is no one's rejected example."""
    return traj.outcome is not None and traj.outcome.fail_reason == GRADE_ERROR


def pools_of(traj: Trajectory) -> tuple[PoolName, ...]:
    """The pools ``traj`` belongs to (a partial episode is a negative too)."""
    tier = traj.outcome.tier if traj.outcome and not ungradable(traj) else None
    if tier in ("success", "recovered"):
        return ("positive",) if traj.outcome.positive else ("excluded",)
    if tier == "failed":
        return ("partial", "negative") if got_close(traj) else ("negative",)
    return ("excluded",)


def got_close(traj: Trajectory) -> bool:
    """Whether a failed episode reached one of its environment's ``progress`` milestones (any
    milestone where the environment names none, is not installed here, or is a tool list, which
    is never imported for this). A query that ran or a guess submitted is no sign of being close."""
    reached = set(traj.verdict.milestones) if traj.verdict else set()
    spec = graded_spec(traj.env)
    progress = spec.progress if spec else None
    return bool(reached) if progress is None else not reached.isdisjoint(progress)


class QualityPools(NamedTuple):
    positive: list[Trajectory]
    partial: list[Trajectory]
    negative: list[Trajectory]
    excluded: list[Trajectory]

    def counts(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in self._fields}

    def partial_tasks(self) -> set[str]:
        """Task ids with a partial episode and no positive one: not yet solved, nearly."""
        solved = {t.task_id for t in self.positive}
        return {t.task_id for t in self.partial if t.task_id not in solved}


def quality_pools(trajs: Iterable[Trajectory]) -> QualityPools:
    """Every trajectory sorted into its pools (see the module docstring)."""
    out = QualityPools([], [], [], [])
    for t in trajs:
        for name in pools_of(t):
            getattr(out, name).append(t)
    return out
