"""Environments with executable tools. ``make_env(name, seed)`` builds one for an episode."""

from __future__ import annotations

from trajforge.envs.base import Environment, ToolError, Verdict


def env_class(name: str) -> type[Environment]:
    """The environment class registered under ``name``."""
    from trajforge.envs.sql import SqlEnv

    registry: dict[str, type[Environment]] = {SqlEnv.name: SqlEnv}
    if name not in registry:
        raise KeyError(f"unknown environment {name!r}; known: {sorted(registry)}")
    return registry[name]


def make_env(name: str, seed: int = 0) -> Environment:
    return env_class(name)(seed=seed)


__all__ = ["Environment", "ToolError", "Verdict", "env_class", "make_env"]
