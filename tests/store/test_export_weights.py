"""Turns trajforge trains with loss 0 leave as OpenAI's ``"weight": 0`` and come back untrained:
self-repair mistakes and recovered episodes' failed turns, through export, import and --execute."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trajforge.cli.main import app
from trajforge.grade import graded
from trajforge.harness import run_episodes
from trajforge.policies.repair import RepairPolicy
from trajforge.store import TrajectoryStore
from trajforge.store.execute import execute_imported
from trajforge.store.export import from_openai, read_openai_jsonl, to_openai, write_openai_jsonl
from trajforge.tasks import synthesize, write_tasks
from trajforge.tasks.repair import Planner


@pytest.fixture(scope="module")
def repaired(tmp_path_factory):
    """Real self-repair episodes (a mistake executed, then the fix), graded, and their pool."""
    root = tmp_path_factory.mktemp("weights")
    pool = [t for t in synthesize("sql", n=30, seed=0).tasks if t.split == "train"]
    chosen = list({t.template: t for t in pool}.values())[:6]
    episodes = [graded(t) for t in run_episodes(chosen, RepairPolicy(Planner(pool)))]
    assert any(s.mistake for t in episodes for s in t.steps), "the planner made no mistake to weight"
    return root, write_tasks(root / "pool.jsonl", chosen), episodes


def assistant_weights(record: dict) -> list[int]:
    return [m.get("weight", 1) for m in record["messages"] if m["role"] == "assistant"]


def test_masked_turns_export_at_weight_zero_and_the_rest_carry_none(repaired):
    _, _, episodes = repaired
    for traj in episodes:
        rec = to_openai(traj)
        want = [int(traj.turn_learns(k)) for k in range(len(traj.steps))]
        assert assistant_weights(rec) == want, traj.task_id
        assert all("weight" not in m or m["weight"] == 0 for m in rec["messages"])  # 1 is OpenAI's default
    assert sum(w == 0 for t in episodes for w in assistant_weights(to_openai(t))) >= len(episodes) // 2


def test_weights_round_trip_through_the_file_and_an_executed_import(repaired, tmp_path):
    _, pool, episodes = repaired
    path = tmp_path / "train.jsonl"
    write_openai_jsonl(episodes, path)
    back, rejected = read_openai_jsonl(path, env="sql")
    assert rejected == []
    for ours, theirs in zip(episodes, back):
        # Imported records carry no outcome: only the weight can say which turns not to learn.
        assert [theirs.turn_learns(k) for k in range(len(theirs.steps))] == \
               [ours.turn_learns(k) for k in range(len(ours.steps))]
    from trajforge.tasks.pool import read_tasks

    run = execute_imported(back, read_tasks(pool), env="sql", policy="imported")
    assert len(run.trajectories) == len(episodes)
    for ours, executed in zip(episodes, (graded(t) for t in run.trajectories)):
        assert [executed.turn_learns(k) for k in range(len(executed.steps))] == \
               [ours.turn_learns(k) for k in range(len(ours.steps))]


@pytest.mark.parametrize("weight", [2, -1, 0.5, True, "0"])
def test_a_weight_other_than_zero_or_one_is_refused_by_name(repaired, weight):
    _, _, episodes = repaired
    rec = to_openai(episodes[0])
    k = next(i for i, m in enumerate(rec["messages"]) if m["role"] == "assistant")
    rec["messages"][k]["weight"] = weight
    with pytest.raises(ValueError, match=rf"messages\[{k}\]\.weight must be 0 or 1"):
        from_openai(rec, "sql", task_id="t")


def test_the_cli_says_how_masked_turns_went_out(repaired, tmp_path):
    _, _, episodes = repaired
    store = TrajectoryStore(tmp_path / "store")
    for t in episodes:
        store.append(t)
    masked = sum(not t.turn_learns(k) for t in episodes for k in range(len(t.steps)))
    runner = CliRunner()
    res = runner.invoke(app, ["export", str(tmp_path / "store"), "--format", "openai", "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 0, res.output
    assert f"{masked} assistant turns carry weight 0" in " ".join(res.output.split())
    lines = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert sum(w == 0 for r in lines for w in assistant_weights(r)) == masked
    res = runner.invoke(app, ["export", str(tmp_path / "store"), "--format", "sharegpt", "--out", str(tmp_path / "lf")])
    assert res.exit_code == 0, res.output
    assert f"warning: {masked} assistant turns" in " ".join(res.output.split()) and "LLaMA-Factory" in res.output
