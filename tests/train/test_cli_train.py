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
            "--max-turns", "1", "--max-new-tokens", "24", "--r", "4", "--checkpoint-every", "1"]
    # 24 tokens: the random model never stops on its own, and what is tested is the command
    # line and its resume, not the length of a rollout (160 tokens tripled this test's time).
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "grpo" / "checkpoints" / "latest").read_text() == "step-000001"
    res = runner.invoke(app, args + ["--resume"])
    assert res.exit_code == 0, res.output
    meta = json.loads((tmp_path / "grpo" / "trajforge_adapter.json").read_text())
    assert meta["result"]["resumed_from"] == 1


def _store(tmp_path, trajs):
    store = TrajectoryStore(tmp_path / "store")
    for t in trajs:
        store.append(t)
    return str(tmp_path / "store")


def test_load_in_4bit_without_bitsandbytes_or_cuda_is_a_clear_error(tiny_model, expert_trajs, tmp_path):
    # Neither machine here can install bitsandbytes: this is the path every CPU user meets.
    res = runner.invoke(app, ["train", "sft", "--data", _store(tmp_path, expert_trajs[:4]), "--model", tiny_model,
                              "--out", str(tmp_path / "a"), "--load-in-4bit"])
    assert res.exit_code == 2, res.output
    assert "bitsandbytes" in res.output and "4bit" in res.output.replace("-", "")
    assert "Traceback" not in res.output and not (tmp_path / "a" / "adapter_model.safetensors").exists()
    res = runner.invoke(app, ["train", "sft", "--data", _store(tmp_path, expert_trajs[:4]), "--model", tiny_model,
                              "--out", str(tmp_path / "b"), "--load-in-4bit", "--load-in-8bit"])
    assert res.exit_code == 2 and "exclude each other" in res.output, res.output


def test_max_len_skips_whole_samples_counts_and_prints_them(tiny_model, expert_trajs, tmp_path):
    from transformers import AutoTokenizer

    from trajforge.train.sft import SFTConfig, build_samples, select

    # The lengths the trainer will see, from the same builder; a limit between the shortest and
    # the longest sample skips some whole and cuts none.
    data, _ = select(expert_trajs, SFTConfig())
    samples, _ = build_samples(data, AutoTokenizer.from_pretrained(tiny_model), tiny_model,
                               SFTConfig(max_len=10**6), {})
    sizes = sorted(len(s.input_ids) for s in samples)
    limit = sizes[len(sizes) // 2]
    over = sum(1 for n in sizes if n > limit)
    assert 0 < over < len(sizes)
    res = runner.invoke(app, ["train", "sft", "--data", _store(tmp_path, expert_trajs), "--model", tiny_model,
                              "--out", str(tmp_path / "a"), "--epochs", "1", "--r", "4", "--batch-size", "2",
                              "--grad-accum", "1", "--replay-share", "0", "--max-len", str(limit)])
    assert res.exit_code == 0, res.output
    assert f"'too_long': {over}" in res.output  # printed with the result line
    # The result line marks what was derived (the lr here) and not what was given (the batch).
    assert "at lr 0.001 (derived), effective batch 2," in " ".join(res.output.split())
    meta = json.loads((tmp_path / "a" / "trajforge_adapter.json").read_text())["result"]
    assert meta["skipped"]["too_long"] == over and meta["samples"] == len(sizes) - over


def test_training_pools_are_read_as_eval_reads_them(sql_tasks, expert_trajs, tmp_path):
    """``--tasks``/``--eval-tasks`` without the asked split, or unreadable: a clear error naming
    what the pool has, before any model is loaded."""
    data = _store(tmp_path, expert_trajs)
    pool = write_tasks(tmp_path / "tasks.jsonl", [t for t in sql_tasks if t.split == "train"])
    n = sum(t.split == "train" for t in sql_tasks)
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    for cmd in (["rft", "--data", data], ["grpo"], ["dpo", "--data", data, "--init-adapter", str(tmp_path)]):
        out = ["--out", str(tmp_path / cmd[0])]
        res = runner.invoke(app, ["train", *cmd, "--tasks", str(pool), "--split", "dev", *out])
        text = " ".join(res.output.split())
        assert res.exit_code == 2 and f"no tasks with split 'dev' in {pool}; it has train {n}" in text, text
        res = runner.invoke(app, ["train", *cmd, "--tasks", str(tmp_path / "bad.jsonl"), *out])
        assert res.exit_code == 2 and "bad.jsonl" in res.output and "Traceback" not in res.output, res.output
    res = runner.invoke(app, ["train", "sft", "--data", data, "--out", str(tmp_path / "sft"),
                              "--eval-tasks", str(pool), "--eval-every", "1"])  # --eval-split: test
    assert res.exit_code == 2 and "no tasks with split 'test'" in " ".join(res.output.split()), res.output


def test_a_negative_time_budget_is_a_clear_error(tiny_model, sql_tasks, expert_trajs, tmp_path):
    """``--max-minutes -5``: named, before any model is loaded, not a run that stops at once (rft)
    or runs without a limit (the others)."""
    data = _store(tmp_path, expert_trajs[:4])
    pool = str(write_tasks(tmp_path / "tasks.jsonl", [t for t in sql_tasks if t.split == "train"]))
    for cmd in (["rft", "--tasks", pool], ["dpo", "--tasks", pool, "--init-adapter", str(tmp_path)], ["sft"]):
        res = runner.invoke(app, ["train", *cmd, "--data", data, "--model", tiny_model,
                                  "--out", str(tmp_path / cmd[0]), "--max-minutes", "-5"])
        text = " ".join(res.output.split())
        assert res.exit_code == 2 and "--max-minutes must be 0 (no limit) or more, not -5" in text, text
        assert not (tmp_path / cmd[0] / "adapter_model.safetensors").exists()


def test_negative_periods_and_a_replay_share_of_everything_are_clear_errors(tiny_model, expert_trajs, tmp_path):
    """``--checkpoint-every -1`` checkpointed every step (N % -1 == 0), ``--eval-every -2`` evaluated
    every other step, and ``--replay-share 1`` failed only after the replay was distilled."""
    data = _store(tmp_path, expert_trajs[:4])
    for flag, value, said in (("--checkpoint-every", "-1", "checkpoint_every must be 0 (off) or more"),
                              ("--eval-every", "-2", "eval_every must be 0 (off) or more"),
                              ("--replay-share", "1", "--replay-share: Input should be less than 1"),
                              ("--replay-share", "-0.1", "--replay-share: Input should be greater than or equal to 0")):
        for recipe in ("sft", "dpo"):  # DPO's --replay-share 1 was a ZeroDivisionError traceback
            res = runner.invoke(app, ["train", recipe, "--data", data, "--model", tiny_model,
                                      "--out", str(tmp_path / "a"), flag, value])
            text = " ".join(res.output.split())
            assert res.exit_code == 2 and said in text, (recipe, text)
            assert not (tmp_path / "a").exists()


def test_tiers_that_are_no_outcome_tier_are_refused_by_name(tiny_model, expert_trajs, tmp_path):
    """``--tiers ungraded`` crashed ``select`` with an AttributeError once the store held an episode
    with no outcome, and a misspelt tier silently selected nothing: both are refused at flag time."""
    from trajforge.train.sft import SFTConfig, select

    data = _store(tmp_path, [*expert_trajs[:2], expert_trajs[2].model_copy(update={"outcome": None})])
    for tiers in ("success,ungraded", "sucess"):
        res = runner.invoke(app, ["train", "sft", "--data", data, "--model", tiny_model,
                                  "--out", str(tmp_path / "a"), "--tiers", tiers])
        text = " ".join(res.output.split())
        assert res.exit_code == 2 and "the tiers are success, recovered, failed, env_fault" in text, text
        assert repr(tiers.split(",")[-1]) in text and "Traceback" not in text
        assert not (tmp_path / "a").exists()
    kept, skipped = select(TrajectoryStore(data).read(), SFTConfig(tiers=["success"]))
    assert len(kept) == 2 and skipped == {"tier:ungraded": 1}
