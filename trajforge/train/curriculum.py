"""Curriculum: unlock tiers easy → medium → hard as the measured success rate allows.

GRPO learns only from groups whose rollouts disagree: tasks the policy always fails (or always
solves) give zero advantage. Starting where the policy sometimes succeeds and moving up once it
mostly does keeps the groups informative.

``partial``: the task ids of the partial pool (``grade/pools.py``: failed episodes that reached a
milestone showing they got close, ``EnvSpec.progress``, on tasks never solved) — the tasks the
policy nearly solves, whose groups are the likeliest to disagree. ``partial_share`` of each
tier's draws come from them while the tier has any.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Collection

from trajforge.schema import Task
from trajforge.train.checkpoint import jsonable, tuplify

TIERS = ("easy", "medium", "hard")


class Curriculum:
    def __init__(self, tasks: list[Task], promote_at: float = 0.6, window: int = 32,
                 newest_share: float = 0.5, seed: int = 0, start: str = "easy",
                 partial: Collection[str] = (), partial_share: float = 0.5):
        self.by_tier = {t: [x for x in tasks if x.tier == t] for t in TIERS}
        wanted = set(partial)
        self.partial = {t: [x for x in self.by_tier[t] if x.id in wanted] for t in TIERS}
        """Per tier, its tasks in the partial pool."""
        self.partial_share = partial_share
        self.levels = [t for t in TIERS if self.by_tier[t]]
        if not self.levels:
            raise ValueError("curriculum needs tasks with tiers easy/medium/hard")
        self.level = self.levels.index(start) if start in self.levels else 0
        self.promote_at, self.window, self.newest_share = promote_at, window, newest_share
        self.recent = {t: deque(maxlen=window) for t in TIERS}
        self.rng = random.Random(seed)
        self.history: list[tuple[int, str]] = []
        """(step, tier) each time a tier was unlocked."""

    @property
    def unlocked(self) -> list[str]:
        return self.levels[: self.level + 1]

    def sample(self, k: int) -> list[Task]:
        """``k`` tasks: ``newest_share`` from the newest unlocked tier, the rest from earlier ones."""
        out = []
        for _ in range(k):
            tiers = self.unlocked
            tier = tiers[-1] if len(tiers) == 1 or self.rng.random() < self.newest_share \
                else self.rng.choice(tiers[:-1])
            near = self.partial[tier]
            pick_from = near if near and self.rng.random() < self.partial_share else self.by_tier[tier]
            out.append(self.rng.choice(pick_from))
        return out

    def record(self, tier: str, solved: bool, step: int = 0) -> None:
        """Feed one rollout's result; unlock the next tier when the newest one is mastered."""
        if tier not in self.recent:
            return
        self.recent[tier].append(bool(solved))
        newest = self.unlocked[-1]
        seen = self.recent[newest]
        if (self.level + 1 < len(self.levels) and len(seen) >= self.window // 2
                and sum(seen) / len(seen) >= self.promote_at):
            self.level += 1
            self.history.append((step, self.levels[self.level]))

    def state(self) -> dict:
        """What the draws still to come depend on, as JSON: the unlocked tier, the recent results,
        the RNG (its position in the stream) and the unlock history. Not replayable from the seed:
        the results fed to ``record`` come from the rollouts."""
        return {"level": self.level, "recent": {t: [int(x) for x in v] for t, v in self.recent.items()},
                "rng": jsonable(self.rng.getstate()), "history": [list(h) for h in self.history]}

    def load_state(self, state: dict) -> None:
        """Continue from ``state()`` (a resumed run draws what the uninterrupted one would have)."""
        self.level = int(state["level"])
        for t, v in state["recent"].items():
            self.recent[t] = deque((bool(x) for x in v), maxlen=self.window)
        self.rng.setstate(tuplify(state["rng"]))
        self.history = [(int(step), tier) for step, tier in state["history"]]

    def rates(self) -> dict[str, float]:
        return {t: sum(v) / len(v) for t, v in self.recent.items() if v}
