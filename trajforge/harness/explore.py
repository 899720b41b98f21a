"""Guided exploration: rewind a failing rollout to its last good step and resample, cooler.

A sampled rollout that fails K turns in a row (a malformed call, an invalid call, or a tool
error such as bad SQL) usually keeps failing: the context is now full of its own mistakes. Guided
exploration restores the environment snapshot and the conversation taken after the last good
step, lowers the sampling temperature for the rest of the episode, and lets the policy try again.
Each rewind is recorded on the trajectory (``Trajectory.rescues``, with the discarded steps), so
rescue rates can be measured and the data stays honest about what happened.

Use: ``run_episodes(..., episode=guided(ExplorationConfig()))``.

Snapshots and restores are the environment's: one that raises ends the episode as ``env_fault``
(``env_start`` for the first snapshot, then ``env_snapshot`` or ``env_restore``) with the failing
turns kept; a restore is tried before anything is discarded, so a failed rewind loses nothing.
"""

from __future__ import annotations

from pydantic import BaseModel

from trajforge.harness.loop import Episode, HarnessConfig
from trajforge.parse.base import ParseResult
from trajforge.policies.base import TurnRequest
from trajforge.schema import Rescue, Step, Trajectory, Verdict


class ExplorationConfig(BaseModel):
    after_failures: int = 2
    """K: consecutive failing turns that trigger a rescue."""
    temperature: float = 0.3
    """Sampling temperature after a rescue."""
    max_rescues: int = 1
    """Rescues per episode (each one can add up to ``max_turns`` turns)."""


def _failed(step: Step) -> bool:
    return bool(step.errors) or not step.calls or any(not r.ok for r in step.results)


class GuidedEpisode(Episode):
    def __init__(self, *args, explore: ExplorationConfig, **kwargs):
        super().__init__(*args, **kwargs)
        self.explore = explore
        self.fails_in_row = 0
        self.rescues: list[Rescue] = []
        self.temperature: float | None = None
        self.good = self._mark()

    def _mark(self) -> tuple[int, int, dict]:
        return len(self.messages), len(self.steps), self.env.snapshot()

    def request(self) -> TurnRequest:
        return super().request()._replace(temperature=self.temperature)

    def close_step(self, step: Step, parsed: ParseResult, tool_s: float, cfg: HarnessConfig) -> None:
        super().close_step(step, parsed, tool_s, cfg)
        if not _failed(step):
            self.fails_in_row = 0
            if not self.end:
                try:
                    self.good = self._mark()
                except Exception as e:  # noqa: BLE001 - the environment's snapshot failed: its fault
                    self.fail("env_snapshot", e)
            return
        self.fails_in_row += 1
        if (self.fails_in_row >= self.explore.after_failures and self.end in ("", "max_errors", "max_turns", "repeated")
                and len(self.rescues) < self.explore.max_rescues):
            self._rewind()

    def _rewind(self) -> None:
        n_messages, n_steps, snap = self.good
        try:
            self.env.restore(snap)
        except Exception as e:  # noqa: BLE001 - the environment's state is unknown now: its fault
            self.fail("env_restore", e)
            return
        self.rescues.append(Rescue(at_turn=len(self.steps) - 1, restored_to=n_steps,
                                   temperature=self.explore.temperature,
                                   discarded=self.steps[n_steps:]))
        del self.messages[n_messages:]
        del self.steps[n_steps:]
        self.end, self.errors_in_row, self.repeats_in_row, self.fails_in_row = "", 0, 0, 0
        self.temperature = self.explore.temperature

    def trajectory(self, verdict: Verdict | None) -> Trajectory:
        return super().trajectory(verdict).model_copy(update={"rescues": self.rescues})


def guided(explore: ExplorationConfig):
    """An episode factory for ``run_episodes`` that turns guided exploration on."""
    def make(*args, **kwargs) -> GuidedEpisode:
        return GuidedEpisode(*args, explore=explore, **kwargs)
    return make


def rescue_rate(trajs: list[Trajectory]) -> dict[str, float | int]:
    """How often a rescue turned a failing rollout into a solved one."""
    rescued = [t for t in trajs if t.rescues]
    solved = sum(1 for t in rescued if t.outcome and t.outcome.correct)
    return {"episodes": len(trajs), "rescued": len(rescued), "rescued_solved": solved,
            "rescue_success_rate": solved / len(rescued) if rescued else 0.0}
