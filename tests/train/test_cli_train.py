"""``trajforge train dpo|grpo`` on a tiny model through the CLI, with resume and clear errors."""

import json

from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.store import TrajectoryStore
from trajforge.tasks.pool import write_tasks

runner = CliRunner()


def test_train_dpo_and_grpo_from_the_cli(tiny_model, sql_tasks, expert_trajs, tmp_path):
    store = TrajectoryStore(tmp_path / "store")
    for t in expert_trajs:
        store.append(t)
    res = runner.invoke(app, ["train", "dpo", "--data", str(tmp_path / "store"), "--model", tiny_model,
                              "--out", str(tmp_path / "dpo")])
    assert res.exit_code == 2 and "no preference pairs" in res.output  # successes only: named clearly
    write_tasks(tmp_path / "tasks.jsonl", sql_tasks)
    args = ["train", "grpo", "--tasks", str(tmp_path / "tasks.jsonl"), "--model", tiny_model,
            "--out", str(tmp_path / "grpo"), "--steps", "2", "--batch-size", "2", "--group-size", "2",
            "--max-turns", "1", "--r", "4", "--checkpoint-every", "1"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "grpo" / "checkpoints" / "latest").read_text() == "step-000001"
    res = runner.invoke(app, args + ["--resume"])
    assert res.exit_code == 0, res.output
    meta = json.loads((tmp_path / "grpo" / "trajforge_adapter.json").read_text())
    assert meta["result"]["resumed_from"] == 1
