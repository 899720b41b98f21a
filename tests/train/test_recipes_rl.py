"""benchmarks/recipes.py's dpo, grpo and rft rows on a tiny model: all start from the sft
adapter, share one sampling of it (done once, timed once) and report wall time and tokens."""

from __future__ import annotations

import json
from argparse import Namespace

import pytest

from benchmarks.recipes import preference_recipe, train_recipe
from trajforge.store import TrajectoryStore
from trajforge.train.sft import SFTConfig, train_sft

pytestmark = pytest.mark.slow  # ~10 s each alone, a tiny model sampled, trained and sampled again


def _sft_and_args(tiny_model, expert_trajs, tmp_path) -> Namespace:
    train_sft(expert_trajs, tiny_model, tmp_path / "sft",
              SFTConfig(max_steps=1, r=4, replay_share=0.0, batch_size=2, grad_accum=1), progress=False)
    return Namespace(model=tiny_model, seed=0, rft_attempts=2, rft_rounds=1, rft_mistakes=0, rft_warm=False,
                     rft_tasks=2, rft_from="sft", replay_share=0.0, rl_minutes=30.0, grpo_steps=1, grpo_lr=5e-4,
                     online_rounds=2, online_lr=1e-4, rft_repair_kinds="", rft_repair_mix=1.0)


def test_dpo_and_grpo_rows_start_from_sft_and_share_one_sampling(tiny_model, sql_tasks, expert_trajs, tmp_path):
    pool = [t for t in sql_tasks if t.split == "train"][:2]
    args = _sft_and_args(tiny_model, expert_trajs, tmp_path)

    dpo = preference_recipe("dpo", tmp_path, args, pool, expert_trajs, {"replay_share": 0.0})
    # a random model solves nothing: the expert's success is each task's chosen side
    assert dpo["attempts"] == 4 and dpo["verified"] == 0 and dpo["sampled_tokens"] > 0
    assert dpo["pairs"] >= 2 and dpo["steps"] >= 1 and dpo["trained_tokens"] > 0
    assert dpo["train_s"] >= dpo["sample_s"] > 0 and dpo["stopped"] is None
    meta = json.loads((tmp_path / "dpo" / "trajforge_adapter.json").read_text())
    assert meta["recipe"] == "dpo" and "sft" in json.dumps(meta["init_adapter"])

    grpo = preference_recipe("grpo", tmp_path, args, pool, expert_trajs, {"replay_share": 0.0})
    assert len(TrajectoryStore(tmp_path / "sft-samples").read()) == 4  # not sampled again
    assert grpo["sample_s"] == dpo["sample_s"]  # and the time it took counts in both rows
    assert grpo["tasks"] == 2 and grpo["dropped_solved"] == 0 and grpo["steps"] == 1
    assert grpo["sampled_tokens"] > dpo["sampled_tokens"]  # its own rollouts on top of the shared ones
    meta = json.loads((tmp_path / "grpo" / "trajforge_adapter.json").read_text())
    assert meta["recipe"] == "grpo" and "sft" in json.dumps(meta["init_adapter"])


def test_rft_row_starts_from_the_shared_sampling(tiny_model, sql_tasks, expert_trajs, tmp_path):
    train = [t for t in sql_tasks if t.split == "train"]
    args = _sft_and_args(tiny_model, expert_trajs, tmp_path)
    dpo = preference_recipe("dpo", tmp_path, args, train[:2], expert_trajs, {"replay_share": 0.0})

    _, rft = train_recipe("rft", tmp_path, args, {"train": train}, expert_trajs)
    # round 1's attempts are the shared ones (same policy, sampling and harness), not sampled anew
    assert len(TrajectoryStore(tmp_path / "rft" / "samples").read()) == 4 and rft["attempts"] == 4
    assert rft["sample_s"] >= dpo["sample_s"] and rft["train_s"] >= rft["sample_s"]
    assert rft["trained_tokens"] > 0 and rft["sampled_tokens"] == dpo["sampled_tokens"]


def test_dpo_online_row_resumes_the_shared_sampling_then_samples_its_own_rounds(tiny_model, sql_tasks,
                                                                               expert_trajs, tmp_path):
    pool = [t for t in sql_tasks if t.split == "train"][:2]
    args = _sft_and_args(tiny_model, expert_trajs, tmp_path)
    dpo = preference_recipe("dpo", tmp_path, args, pool, expert_trajs, {"replay_share": 0.0})

    row = preference_recipe("dpo-online", tmp_path, args, pool, expert_trajs, {"replay_share": 0.0})
    stored = TrajectoryStore(tmp_path / "dpo-online" / "samples").read()
    # round 1 is the shared sft sampling (resumed, not drawn again), round 2 the round-1 adapter's own
    assert row["sampled"] == [4, 4] and len(stored) == 8
    assert len({t.policy for t in stored}) == 2 and row["sample_s"] == dpo["sample_s"]
    assert row["rounds"] == 2 and row["pairs"][0] >= 2 and row["steps"] >= 2 and row["trained_tokens"] > 0
    assert row["train_s"] >= row["sample_s"] > 0
    meta = json.loads((tmp_path / "dpo-online" / "trajforge_adapter.json").read_text())
    assert meta["recipe"] == "dpo-online" and len(meta["dpo_online"]["rounds"]) == 3
