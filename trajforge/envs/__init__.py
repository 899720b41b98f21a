"""Environments with executable tools. ``make_env(name, seed)`` builds one for an episode."""

from __future__ import annotations

from trajforge.envs.base import Environment, ToolError, Verdict


def env_class(name: str) -> type[Environment]:
    """The environment class registered under ``name``.

    ``mcp:PATH/tools.json`` names a tool-list environment built from that JSON and the sibling
    ``tools.py`` (``trajforge.envs.mcp``); any other name is a built-in.
    """
    from trajforge.envs.code import CodeEnv
    from trajforge.envs.mcp import PREFIX, mcp_env_class
    from trajforge.envs.sql import SqlEnv
    from trajforge.envs.travel import TravelEnv
    from trajforge.envs.web import WebEnv

    if name.startswith(PREFIX):
        return mcp_env_class(name[len(PREFIX):], name=name)
    registry: dict[str, type[Environment]] = {SqlEnv.name: SqlEnv, TravelEnv.name: TravelEnv,
                                              WebEnv.name: WebEnv, CodeEnv.name: CodeEnv}
    if name not in registry:
        raise KeyError(f"unknown environment {name!r}; known: {sorted(registry)}")
    return registry[name]


def make_env(name: str, seed: int = 0) -> Environment:
    return env_class(name)(seed=seed)


__all__ = ["Environment", "ToolError", "Verdict", "env_class", "make_env"]
