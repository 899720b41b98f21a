"""Append-only JSONL store of trajectories, crash-safe.

Each writer appends whole lines to its own shard and flushes + fsyncs after each episode, so a
crash loses at most the line being written. On read, a torn last line (no trailing newline or
invalid JSON) is skipped and reported; the next append starts on a fresh line so it never glues
onto a torn one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

from trajforge.schema import Trajectory


def episode_key(task_id: str, policy: str, sample: int) -> str:
    """Idempotency key of one episode."""
    return f"{task_id}|{policy}|{sample}"


class TrajectoryStore:
    """A directory of ``*.jsonl`` shards."""

    def __init__(self, root: str | Path, shard: str = "trajectories"):
        self.root = Path(root)
        self.shard = shard
        self.torn: list[str] = []

    @property
    def path(self) -> Path:
        return self.root / f"{self.shard}.jsonl"

    def append(self, traj: Trajectory) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        line = traj.model_dump_json(exclude_none=True) + "\n"
        with open(self.path, "ab+") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":  # torn tail from a crash: start a fresh line
                    f.write(b"\n")
            f.write(line.encode())
            f.flush()
            os.fsync(f.fileno())

    def shards(self) -> list[Path]:
        if self.root.is_file():
            return [self.root]
        return sorted(self.root.glob("*.jsonl"))

    def __iter__(self) -> Iterator[Trajectory]:
        self.torn = []
        for shard in self.shards():
            with open(shard, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        yield Trajectory.model_validate(json.loads(line))
                    except (json.JSONDecodeError, ValueError):
                        self.torn.append(f"{shard.name}:{lineno}")

    def read(self) -> list[Trajectory]:
        return list(self)

    def keys(self) -> set[str]:
        return {episode_key(t.task_id, t.policy, t.sample) for t in self}

    def rewrite(self, trajs: list[Trajectory]) -> None:
        """Replace the store's content atomically (used by ``grade`` to add outcomes)."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for t in trajs:
                f.write(t.model_dump_json(exclude_none=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        for shard in self.shards():
            if shard != self.path:
                shard.unlink()
        os.replace(tmp, self.path)
