"""The environment registry: built-ins by one line each, register(), entry points, mcp: lists."""

from __future__ import annotations

import pytest

from trajforge.envs import EnvSpec, env_names, env_spec, make_env, register, unregister
from trajforge.envs.registry import BUILTINS
from trajforge.envs.sql import SPEC as SQL, SqlEnv


def test_every_builtin_exports_a_spec_under_its_name():
    assert set(BUILTINS) == {"sql", "sql-exec", "travel", "web", "code"} <= set(env_names())
    for name in BUILTINS:
        spec = env_spec(name)
        assert spec.name == name and spec.env.name == name and spec.generate is not None and spec.summary


def test_unknown_names_list_what_is_known():
    with pytest.raises(KeyError, match=r"unknown environment 'nope'; known: \['code', 'sql', 'sql-exec', 'travel', 'web'"):
        env_spec("nope")


def test_register_refuses_taken_names_unless_replacing():
    with pytest.raises(ValueError, match="already registered"):
        register(EnvSpec(name="sql", env=SqlEnv))
    with pytest.raises(ValueError, match="tool-list environments"):
        register(EnvSpec(name="mcp:x", env=SqlEnv))
    with pytest.raises(TypeError, match="takes an EnvSpec"):
        register(SqlEnv)  # type: ignore[arg-type]

    class Quiet(SqlEnv):
        instructions = "Answer quietly."

    try:
        register(EnvSpec(name="sql", env=Quiet), replace=True)
        assert type(make_env("sql")) is Quiet
    finally:
        unregister("sql")
    assert env_spec("sql") is SQL and type(make_env("sql")) is SqlEnv


def test_a_spec_without_a_generator_says_where_tasks_come_from():
    from trajforge.tasks import synthesize

    try:
        register(EnvSpec(name="bare", env=SqlEnv))
        with pytest.raises(ValueError, match="no task generator for environment 'bare': its tasks come from an LLM"):
            synthesize("bare", 4)
    finally:
        unregister("bare")
