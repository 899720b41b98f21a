"""Environments with executable tools, one folder each, found through one registry.

    env = make_env("sql", seed=0)     # a fresh environment for one episode
    spec = env_spec("travel")         # its EnvSpec: class, task generator, tiering, expert reasoning
    register(EnvSpec(name="counter", env=CounterEnv, generate=generate_counter_tasks))

Layout: ``base`` (the Environment protocol: tools are typed methods; ``ToolError`` is the model's
mistake, ``InfraError`` the environment's own failure, the only one that is an ``env_fault``), ``registry`` (EnvSpec,
built-ins, the ``trajforge.envs`` entry-point group, ``mcp:`` tool lists), ``toolsets`` (toolsets
by fingerprint, stored beside the data), ``answers`` (answer comparison any environment may use);
shared infrastructure ``sandbox`` / ``seccomp`` / ``workdir`` (isolated code execution) and
``sqldb`` (the seeded retail database); and one package per environment — ``sql/``, ``travel/``,
``web/``, ``code/``, ``mcp/`` — each with its ``env.py``, its world or data builder and its task
generators (``tasks.py``), exporting ``SPEC``.
"""

from __future__ import annotations

from trajforge.envs.base import Environment, InfraError, ToolError
from trajforge.envs.registry import (EnvSpec, env_class, env_names, env_spec, make_env, register,
                                     unregister)
from trajforge.envs.toolsets import Toolsets, env_toolset, toolset_for
from trajforge.schema import Verdict

__all__ = ["EnvSpec", "Environment", "InfraError", "ToolError", "Toolsets", "Verdict", "env_class", "env_names",
           "env_spec", "env_toolset", "make_env", "register", "toolset_for", "unregister"]
