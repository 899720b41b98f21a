"""Online DPO (train/dpo_online.py): each round samples from the adapter the last round left,
trains DPO on those pairs on top of it, and a round without pairs keeps the adapter it had. The
policy is scripted at the model boundary; the tiny model, the harness, the grading, the pairs and
DPO itself are real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tiny import build_tiny_adapter
from trajforge.train.dpo_online import OnlineDPOConfig, train_dpo_online

TINY = dict(max_steps=1, r=4, replay_share=0.0, batch_size=2, grad_accum=1, pairs="turn")


class _Flaky:
    """The expert's calls on sample 0 of each task, a wrong answer on the others."""

    def __init__(self, name, always_right=False):
        from trajforge.policies.expert import ExpertPolicy

        self.expert, self.always_right = ExpertPolicy(), always_right
        self.name, self.dialect, self.batch_size, self.temperature = name, self.expert.dialect, 8, 0.7

    def act(self, requests):
        return [self.expert.reference_turn(r.task, r.turn) if r.sample == 0 or self.always_right
                else self.expert.reference_turn(r.task.model_copy(update={"reference": (
                    r.task.reference[-1].model_copy(update={"arguments": {"answer": "nothing"}}),)}), 0)
                for r in requests]


def test_each_round_samples_from_the_last_rounds_adapter_and_trains_on_its_pairs(tiny_model, sql_tasks,
                                                                                 expert_trajs, tmp_path):
    tasks = [t for t in sql_tasks if t.split == "train"][:3]
    start = str(build_tiny_adapter(tiny_model, tmp_path / "start", seed=1))
    asked = []

    def policy_for(adapter, r):
        asked.append((adapter, r))
        return _Flaky(f"dpo-round{r}", always_right=r == 3)  # round 3: every attempt solved, no pair

    cfg = OnlineDPOConfig(rounds=3, attempts=2, **TINY)
    res = train_dpo_online(tasks, expert_trajs, tiny_model, tmp_path / "online", cfg, init_adapter=start,
                           policy_for=policy_for, progress=False)
    r1, r2, r3 = res.rounds[1:]
    assert asked == [(start, 1), (r1.adapter_dir, 2), (r2.adapter_dir, 3)]
    assert [(r.sampled, r.solved, r.pairs) for r in (r1, r2, r3)] == [(6, 3, 3), (6, 3, 3), (6, 6, 0)]
    assert r1.dpo.steps == r2.dpo.steps == 1 and res.steps == 2
    assert r3.dpo is None and r3.adapter_dir == r2.adapter_dir  # nothing to prefer: the adapter stays
    meta = json.loads((tmp_path / "online" / "trajforge_adapter.json").read_text())
    assert meta["recipe"] == "dpo-online" and [r["dpo_steps"] for r in meta["dpo_online"]["rounds"]] == [0, 1, 1, 0]
    assert (tmp_path / "online" / "adapter_model.safetensors").read_bytes() == \
        (tmp_path / "online" / "round-2" / "adapter_model.safetensors").read_bytes()

    with pytest.raises(ValueError, match="starts from an adapter"):
        train_dpo_online(tasks, expert_trajs, tiny_model, tmp_path / "bad", cfg, policy_for=policy_for)


def test_train_dpo_with_tasks_samples_a_real_model_in_rounds(tiny_model, sql_tasks, expert_trajs, tmp_path):
    """``train dpo --tasks``: the tiny model's own attempts (all failed: it is random) against the
    expert's episode for each unsolved task (2 tasks × 2 attempts: 4 pairs), one DPO step a round; the second round samples with
    the first round's adapter. Without ``--init-adapter`` it is refused with the reason."""
    from typer.testing import CliRunner

    from trajforge.cli.main import app
    from trajforge.store import TrajectoryStore
    from trajforge.tasks.pool import write_tasks
    from trajforge.train.rft import adapter_digest

    train = [t for t in sql_tasks if t.split == "train"][:2]
    store = TrajectoryStore(tmp_path / "expert")
    for t in expert_trajs:
        if t.task_id in {task.id for task in train}:
            store.append(t)
    write_tasks(tmp_path / "tasks.jsonl", train + [t for t in sql_tasks if t.split == "test"][:1])
    start = build_tiny_adapter(tiny_model, tmp_path / "start", seed=1)
    args = ["train", "dpo", "--tasks", str(tmp_path / "tasks.jsonl"), "--data", str(tmp_path / "expert"),
            "--model", tiny_model, "--out", str(tmp_path / "dpo"), "--rounds", "2", "--attempts", "2",
            "--max-new-tokens", "16", "--max-turns", "2", "--max-steps", "1", "--r", "4", "--replay-share", "0",
            "--pairs", "turn"]
    res = CliRunner().invoke(app, [*args, "--init-adapter", str(start)])
    assert res.exit_code == 0, res.output
    assert "round 1: 4 attempts, 0 solved; 1 DPO steps on 4 pairs" in res.output
    assert "round 2: 4 attempts, 0 solved; 1 DPO steps on 4 pairs" in res.output
    sampled = TrajectoryStore(tmp_path / "dpo" / "samples").read()
    assert {t.split for t in sampled} == {"train"} and len(sampled) == 8
    assert {t.policy for t in sampled} == {f"dpo-round1-{adapter_digest(start)}",
                                           f"dpo-round2-{adapter_digest(tmp_path / 'dpo' / 'round-1')}"}
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2 and "starts from an adapter" in " ".join(refused.output.split())
    resumed = CliRunner().invoke(app, [*args, "--init-adapter", str(start), "--resume"])
    assert resumed.exit_code == 2 and "resumes the sampling by itself" in " ".join(resumed.output.split())


def test_a_rerun_with_fewer_attempts_or_tasks_pairs_only_its_own_attempts(sql_tasks, expert_trajs, tmp_path,
                                                                          monkeypatch):
    """The samples store of an earlier run in the same out dir, same sampler name: a rerun with
    fewer attempts per task or fewer tasks builds its pairs from what it asked for only."""
    import trajforge.train.dpo_online as online
    from trajforge.train.dpo import DPOResult

    pools = []

    def fake_dpo(pool, model, out_dir, cfg, init_adapter=None, progress=True):  # at the model boundary
        pools.append(sorted((t.task_id, t.policy, t.sample) for t in pool))
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        return DPOResult(adapter_dir=str(out_dir), pairs=1, skipped={}, steps=1, losses=[0.0], margins=[0.0],
                         accuracy=[0.0], seconds=0.0)

    monkeypatch.setattr(online, "train_dpo", fake_dpo)
    tasks = [t for t in sql_tasks if t.split == "train"][:3]
    cfg = OnlineDPOConfig(rounds=1, attempts=3, **TINY)
    policy_for = lambda adapter, r: _Flaky(f"dpo-round{r}")  # noqa: E731
    train_dpo_online(tasks, expert_trajs, "m", tmp_path / "online", cfg, init_adapter="start",
                     policy_for=policy_for, progress=False)
    for i, (pool, attempts) in enumerate([(tasks, 2), (tasks[:2], 3)]):
        run = dict(cfg=cfg.model_copy(update={"attempts": attempts}), init_adapter="start", policy_for=policy_for,
                   progress=False)
        fresh = train_dpo_online(pool, expert_trajs, "m", tmp_path / f"fresh-{i}", **run)
        again = train_dpo_online(pool, expert_trajs, "m", tmp_path / "online", **run)
        assert again.rounds[1].sampled == fresh.rounds[1].sampled == len(pool) * attempts
        assert pools[-1] == pools[-2]
