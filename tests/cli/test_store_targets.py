"""Every command that writes a file the user names refuses a target inside a trajectory store: a
clear error (exit code 2) naming the flag, nothing written, the store's bytes unchanged.

The targets: a shard itself, a new file in the store folder (read back as a shard if it is
``.jsonl``), the store folder, and a path inside the store the command reads.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.eval.run import collect
from trajforge.policies import make_policy
from trajforge.tasks import synthesize
from trajforge.tasks.pool import write_tasks

BUDGET_S = 20.0
"""Per command: a refusal comes before any work (no model is loaded, nothing is run)."""


@pytest.fixture()
def run(tmp_path):
    """A real store of executed SQL episodes and the task pool they ran on."""
    tasks = synthesize("sql", 12, seed=2).tasks
    pool = tmp_path / "tasks.jsonl"
    write_tasks(pool, tasks)
    store = tmp_path / "store"
    collect(tasks[:4], make_policy("expert"), store, show_progress=False)
    return pool, store


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def targets(store: Path) -> dict[str, Path]:
    return {"shard": store / "shard-0.jsonl", "in_store": store / "out.jsonl", "store": store,
            "in_store_file": store / "metrics.json"}


COMMANDS = {  # name → (flag, args given the pool, the store and the target)
    "synth --out": ("--out", lambda pool, store, t: ["synth", "--env", "sql", "--n", "3", "--out", str(t)]),
    "synth --rejected": ("--rejected", lambda pool, store, t: [
        "synth", "--env", "sql", "--n", "3", "--out", str(store.parent / "fresh.jsonl"), "--rejected", str(t)]),
    "eval --json": ("--json", lambda pool, store, t: [
        "eval", "--tasks", str(pool), "--policy", "expert", "--split", "", "--json", str(t)]),
    "report --out": ("--out", lambda pool, store, t: ["report", str(store.parent), "--out", str(t)]),
    "demo --json": ("--json", lambda pool, store, t: ["demo", "--json", str(t), "--out", str(store.parent / "demo")]),
    "train sft --out": ("--out", lambda pool, store, t: ["train", "sft", "--data", str(store), "--out", str(t)]),
    "train dpo --out": ("--out", lambda pool, store, t: ["train", "dpo", "--data", str(store), "--out", str(t)]),
    "train grpo --out": ("--out", lambda pool, store, t: ["train", "grpo", "--tasks", str(pool), "--out", str(t)]),
    "migrate --out": ("--out", lambda pool, store, t: ["migrate", str(store), "--out", str(t)]),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("target", ["shard", "in_store", "store", "in_store_file"])
def test_a_command_refuses_to_write_into_a_store(command, target, run):
    pool, store = run
    flag, args = COMMANDS[command]
    path = targets(store)[target]
    before, outside = snapshot(store), snapshot(store.parent)
    started = time.perf_counter()
    res = CliRunner().invoke(app, args(pool, store, path))
    assert res.exit_code == 2, res.output
    assert f"error: {flag} " in res.output and "store" in res.output, res.output
    assert snapshot(store) == before  # the store is untouched, the target not created
    assert snapshot(store.parent) == outside  # and nothing else was written either
    assert time.perf_counter() - started < BUDGET_S


def test_eval_json_inside_its_own_store_is_refused(run, tmp_path):
    pool, _ = run
    res = CliRunner().invoke(app, ["eval", "--tasks", str(pool), "--policy", "expert", "--split", "",
                                   "--store", str(tmp_path / "evals"), "--json", str(tmp_path / "evals" / "deep" / "m.json")])
    assert res.exit_code == 2 and "inside the store being read" in res.output, res.output
    assert not (tmp_path / "evals").exists()


def test_targets_outside_a_store_are_written(run, tmp_path):
    pool, store = run
    res = CliRunner().invoke(app, ["eval", "--tasks", str(pool), "--policy", "expert", "--split", "",
                                   "--json", str(tmp_path / "eval.json")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "eval.json").is_file()
    res = CliRunner().invoke(app, ["migrate", str(store), "--out", str(tmp_path / "store-v2")])
    assert res.exit_code == 0, res.output
