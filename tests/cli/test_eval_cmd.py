"""`trajforge eval` says which split it evaluated and how many tasks, takes any split label, and names
the splits a pool has when asked for one it lacks."""

from __future__ import annotations

from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.tasks import synthesize, write_tasks


def test_eval_names_its_split_and_takes_any_label(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJFORGE_HOME", str(tmp_path))
    tasks = synthesize("sql", 8, seed=0).tasks
    tasks = [t.model_copy(update={"split": "dev"}) if t.split == "test" else t for t in tasks]
    pool = write_tasks(tmp_path / "pool.jsonl", tasks)
    runner = CliRunner()
    res = runner.invoke(app, ["eval", "--tasks", str(pool), "--policy", "expert"])  # default: heldout
    assert res.exit_code == 0, res.output
    assert f"evaluating split 'heldout': 1 task from {pool}" in " ".join(res.output.split())
    dev = runner.invoke(app, ["eval", "--tasks", str(pool), "--policy", "expert", "--split", "dev"])
    assert dev.exit_code == 0 and "evaluating split 'dev': 1 task from" in " ".join(dev.output.split())
    every = runner.invoke(app, ["eval", "--tasks", str(pool), "--policy", "expert", "--split", ""])
    assert "evaluating all splits (train 6, dev 1, heldout 1): 8 tasks" in " ".join(every.output.split())
    missing = runner.invoke(app, ["eval", "--tasks", str(pool), "--policy", "expert", "--split", "validation"])
    assert missing.exit_code == 2
    assert "no tasks with split 'validation'" in " ".join(missing.output.split())
    assert "it has train 6, dev 1, heldout 1" in " ".join(missing.output.split())
