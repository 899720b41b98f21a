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


def test_eval_shows_demonstrations_from_a_stores_train_split(tmp_path, monkeypatch):
    from trajforge.harness.demos import HEAD, without_block
    from trajforge.policies import make_policy
    from trajforge.eval.run import collect
    from trajforge.store import TrajectoryStore

    import tempfile

    monkeypatch.setenv("TRAJFORGE_HOME", str(tmp_path))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the store's pool file is written
    tasks = synthesize("sql", 12, seed=0).tasks
    pool = write_tasks(tmp_path / "pool.jsonl", tasks)
    collect(tasks, make_policy("expert"), tmp_path / "solved", show_progress=False)  # every split
    runner = CliRunner()
    args = ["eval", "--tasks", str(pool), "--policy", "expert", "--store", str(tmp_path / "ev")]
    res = runner.invoke(app, [*args, "--demos", "2", "--demo-pool", str(tmp_path / "solved")])
    assert res.exit_code == 0, res.output
    heldout = {t.id: t for t in tasks if t.split == "heldout"}
    shown = TrajectoryStore(tmp_path / "ev").read()
    assert {t.task_id for t in shown} == set(heldout)
    train = [t.prompt for t in tasks if t.split == "train"]
    for traj in shown:
        opening = traj.messages[1].content
        assert opening.startswith(HEAD) and without_block(opening) == heldout[traj.task_id].prompt
        assert sum(p in opening for p in train) == 2  # two training tasks, nothing of another split
        assert traj.outcome.tier == "success"
    again = runner.invoke(app, ["collect", "--tasks", str(pool), "--policy", "expert", "--split", "heldout",
                                "--out", str(tmp_path / "co"), "--demos", "2", "--demo-pool", str(tmp_path / "solved")])
    assert again.exit_code == 0, again.output
    assert list(scratch.iterdir()) == []  # both commands removed the pool file they wrote
    nopool = runner.invoke(app, [*args, "--demos", "2"])
    assert nopool.exit_code == 2 and "no pool" in " ".join(nopool.output.split())
    empty = runner.invoke(app, [*args, "--demos", "2", "--demo-pool", str(tmp_path / "nothing")])
    assert empty.exit_code == 2 and "--demo-pool" in empty.output


def test_eval_without_a_store_leaves_nothing_in_the_temp_folder(tmp_path, monkeypatch):
    """The episodes of a run without ``--store`` only feed its metrics: its scratch store goes when it
    ends, also when it fails (a policy spec that is refused); with ``--store`` they stay."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    pool = write_tasks(tmp_path / "pool.jsonl", synthesize("sql", 8, seed=0).tasks)
    runner = CliRunner()
    res = runner.invoke(app, ["eval", "--tasks", str(pool), "--policy", "expert"])
    assert res.exit_code == 0, res.output
    bad = runner.invoke(app, ["eval", "--tasks", str(pool), "--policy", "gpt"])
    assert bad.exit_code == 2
    assert list(scratch.iterdir()) == []
    kept = runner.invoke(app, ["eval", "--tasks", str(pool), "--policy", "expert", "--store", str(tmp_path / "s")])
    assert kept.exit_code == 0 and list((tmp_path / "s").glob("shard-*.jsonl"))


def test_eval_counts_the_run_it_collected_not_another_sampling_of_the_same_policy(tmp_path, monkeypatch):
    """A store keys episodes by sampling settings too: with a T = 0.7 run of ``expert`` already in it,
    the greedy eval's metrics counted both runs' sample 0, every task twice."""
    import json

    import pytest

    from trajforge.eval.run import collect, metrics_of
    from trajforge.policies import make_policy
    from trajforge.schema import SamplingConfig

    monkeypatch.setenv("TRAJFORGE_HOME", str(tmp_path))
    tasks = synthesize("sql", 12, seed=0).tasks
    pool = write_tasks(tmp_path / "pool.jsonl", tasks)
    heldout = [t for t in tasks if t.split == "heldout"]
    warm = make_policy("expert")
    warm.sampling = SamplingConfig(temperature=0.7)
    collect(heldout, warm, tmp_path / "st", samples=2, show_progress=False)
    res = CliRunner().invoke(app, ["eval", "--tasks", str(pool), "--policy", "expert", "--store", str(tmp_path / "st"),
                                   "--json", str(tmp_path / "m.json")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "m.json").read_text())["expert"]["n"] == len(heldout)
    assert metrics_of(tmp_path / "st", heldout, ["expert"], {"expert": warm.sampling})["expert"]["n"] == len(heldout)
    with pytest.raises(ValueError, match="expert at several sampling settings"):
        metrics_of(tmp_path / "st", heldout, ["expert"])  # which run to count is not said: not guessed
