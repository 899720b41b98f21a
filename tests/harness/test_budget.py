"""Turn budgets per task: the explicit setting, else the task's own budget, else the environment's default;
and the expert solves every built-in environment's tasks at default settings (``eval --policy expert``)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.envs import EnvSpec, register, unregister
from trajforge.envs.registry import DEFAULT_MAX_TURNS
from trajforge.envs.sql import SqlEnv
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.harness.budget import env_default, turn_budget
from trajforge.policies.scripted import ScriptedPolicy
from trajforge.schema import Task, ToolCall
from trajforge.tasks import read_tasks


def task(env="sql", calls=2) -> Task:
    reference = tuple(ToolCall(name="list_tables") for _ in range(calls))
    return Task(id=f"t{calls}", env=env, prompt="q", tier="easy", split="train", template="x",
                reference=reference, expected=None)


def test_explicit_setting_then_the_tasks_reference_then_the_environments_default():
    assert HarnessConfig().max_turns is None
    assert turn_budget(task(calls=14), max_turns=5) == 5  # the flag wins
    assert turn_budget(task(calls=14)) == 32 and turn_budget(task(calls=2)) == 8  # 2 x reference + 4
    register(EnvSpec(name="budgeted", env=SqlEnv, max_turns=3))
    try:
        env_default.cache_clear()
        assert turn_budget(task("budgeted", calls=0)) == 3
    finally:
        unregister("budgeted")
        env_default.cache_clear()
    assert turn_budget(task("sql", calls=0)) == DEFAULT_MAX_TURNS
    assert turn_budget(task("no-such-env", calls=0)) == DEFAULT_MAX_TURNS


def test_an_episode_ends_at_its_own_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJFORGE_HOME", str(tmp_path))
    stuck = ScriptedPolicy(['<tool_call>{"name": "list_tables", "arguments": {}}</tool_call>'])
    never = HarnessConfig(max_repeats=99)  # the same call again and again: stopped as a repeat otherwise
    [short, long] = run_episodes([task(calls=1), task(calls=5)], stuck, never)
    assert (short.end, len(short.steps)) == ("max_turns", 6) and (long.end, len(long.steps)) == ("max_turns", 14)
    [capped] = run_episodes([task(calls=5)], stuck, HarnessConfig(max_turns=3, max_repeats=99))
    assert len(capped.steps) == 3


@pytest.mark.parametrize("env", ["sql", "code", "web", "travel"])
def test_the_expert_solves_every_builtin_environment_at_default_settings(env, tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJFORGE_HOME", str(tmp_path))
    pool = tmp_path / "pool.jsonl"
    runner = CliRunner()
    made = runner.invoke(app, ["synth", "--env", env, "--n", "12", "--out", str(pool)])
    assert made.exit_code == 0, made.output
    if env == "web":  # references longer than the old fixed 8 turns: what made the expert fail
        assert max(len(t.reference) for t in read_tasks(pool)) > 8
    res = runner.invoke(app, ["eval", "--tasks", str(pool), "--policy", "expert", "--split", ""])
    assert res.exit_code == 0, res.output
    row = next(line.split() for line in res.output.splitlines() if line.split()[:2] == ["expert", "all"])
    assert row[3] == "100%", res.output  # completion, every tier included
