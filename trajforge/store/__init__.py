"""Append-only trajectory storage."""

from trajforge.store.jsonl import TrajectoryStore, episode_key

__all__ = ["TrajectoryStore", "episode_key"]
