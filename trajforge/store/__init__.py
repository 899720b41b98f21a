"""Append-only trajectory storage."""

from trajforge.store.jsonl import (ShardBusy, ShardWriter, TrajectoryStore, episode_key, is_fault,
                                   resume_keys)

__all__ = ["ShardBusy", "ShardWriter", "TrajectoryStore", "episode_key", "is_fault", "resume_keys"]
