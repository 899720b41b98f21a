"""SFT with retrieved demonstrations (train/demos.py): the adapter carries its pool, and the prompt
an ``hf:`` policy on it builds for a task is token for token the one that task was trained on."""

from __future__ import annotations

import hashlib
import json

import pytest

from trajforge.envs import make_env
from trajforge.grade import graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.harness.demos import HEAD, load_pool
from trajforge.harness.loop import Episode
from trajforge.policies.hf import HFPolicy
from trajforge.train.sft import SFTConfig, build_samples, train_sft

ONE_STEP = dict(max_steps=1, r=4, replay_share=0.0, demos=2)


@pytest.fixture(scope="module")
def adapter(tiny_model, expert_trajs, tmp_path_factory):
    out = tmp_path_factory.mktemp("demos") / "adapter"
    res = train_sft(expert_trajs[:10], tiny_model, out, SFTConfig(**ONE_STEP), progress=False)
    return out, res


def test_the_adapter_records_and_carries_its_pool(adapter, expert_trajs):
    out, res = adapter
    meta = json.loads((out / "trajforge_adapter.json").read_text())["demos"]
    assert meta["pool"] == "demos.jsonl" and meta["k"] == 2 and meta["source"] == "training data"
    assert meta["sha256"] == hashlib.sha256((out / "demos.jsonl").read_bytes()).hexdigest()
    pool = load_pool(out, meta["sha256"])
    assert [e.task_id for e in pool.entries] == sorted({t.task_id for t in expert_trajs[:10]})
    assert res.built == {"rendered": 10}


def test_eval_prompts_are_the_training_prompts(adapter, tiny_model, expert_trajs, sql_tasks):
    out, _ = adapter
    policy = HFPolicy(tiny_model, adapter=str(out), dtype="float32", max_new_tokens=4)
    assert policy.demos["k"] == 2
    data = expert_trajs[:10]
    cfg = SFTConfig(**ONE_STEP)
    from trajforge.train.demos import sft_demos

    shown = sft_demos(data, 2, None, out, write=False)
    samples, _ = build_samples(data, policy.tokenizer, tiny_model, cfg, {}, shown.demos)
    by_id = {t.id: t for t in sql_tasks}
    for traj, sample in list(zip(data, samples))[:3]:
        trained = sample.input_ids[: sample.loss_mask.index(1)]
        task = by_id[traj.task_id]
        env = make_env(task.env, seed=task.seed)
        episode = Episode(task, 0, env, policy, HarnessConfig(), observation=env.reset(task))
        env.close()
        assert policy.prompt_ids(episode.request()) == trained
        text = policy.tokenizer.decode(trained)
        assert HEAD in text and text.count("Task: ") == 2
        assert task.reference[0].arguments.get("query", "\0") not in text.split(task.prompt)[0]  # not its own SQL


def test_an_adapter_with_demos_runs_episodes_as_usual(adapter, tiny_model, sql_tasks):
    out, _ = adapter
    policy = HFPolicy(tiny_model, adapter=str(out), dtype="float32", max_new_tokens=4)
    heldout = [t for t in sql_tasks if t.split in ("heldout", "test")][:3]
    trajs = [graded(t) for t in run_episodes(heldout, policy, HarnessConfig(max_turns=1))]
    for traj, task in zip(trajs, heldout):
        opening = traj.messages[1].content
        assert opening.startswith(HEAD) and opening.endswith(task.prompt)
        assert not [t.prompt for t in heldout if t.prompt in opening[: -len(task.prompt)]]
        assert traj.outcome is not None and traj.steps[0].prompt_ids
        assert policy.tokenizer.decode(traj.steps[0].prompt_ids).count("Task: ") == 2
    # --demos 0 turns them off for the same adapter.
    (plain,) = run_episodes(heldout[:1], policy, HarnessConfig(max_turns=1, demos=0))
    assert plain.messages[1].content == heldout[0].prompt


@pytest.mark.slow
def test_adapters_trained_on_top_inherit_the_demonstrations(adapter, tiny_model, expert_trajs, sql_tasks,
                                                            tmp_path, monkeypatch):
    """SFT, DPO and GRPO on top of an adapter trained with demonstrations train with its block and
    record its pool, so eval and serve (which read the top adapter's meta) show what was trained."""
    from trajforge.train import dpo, grpo
    from trajforge.train.dpo import DPOConfig, train_dpo
    from trajforge.train.grpo import GRPOConfig, train_grpo

    base, _ = adapter
    recorded = json.loads((base / "trajforge_adapter.json").read_text())["demos"]

    def inherited(out):
        meta = json.loads((out / "trajforge_adapter.json").read_text())["demos"]
        assert (meta["k"], meta["sha256"]) == (recorded["k"], recorded["sha256"])
        assert meta["source"] == f"inherited from {base.resolve()}"
        assert (out / "demos.jsonl").read_bytes() == (base / "demos.jsonl").read_bytes()
        assert HFPolicy(tiny_model, adapter=str(out), dtype="float32").demos["k"] == 2

    res = train_sft(expert_trajs[:4], tiny_model, tmp_path / "sft", SFTConfig(max_steps=1, r=4, replay_share=0.0),
                    init_adapter=str(base), progress=False)
    assert res.built == {"rendered": 4}  # the block changed every prompt: none came from stored ids
    inherited(tmp_path / "sft")

    wrong = [graded(t.model_copy(update={"sample": 1, "verdict": t.verdict.model_copy(
        update={"correct": False, "answer": "-1"})})) for t in expert_trajs[:2]]
    texts = []
    real_render = dpo.render_pair

    def spy(pair, tok, builder=None):
        chosen, rejected = real_render(pair, tok, builder)
        texts.extend(tok.decode(s.input_ids) for s in (chosen, rejected))
        return chosen, rejected

    monkeypatch.setattr(dpo, "render_pair", spy)
    train_dpo(expert_trajs[:2] + wrong, tiny_model, tmp_path / "dpo", DPOConfig(r=4, max_steps=1, batch_size=2,
              replay_share=0.0), init_adapter=str(base), progress=False)
    assert len(texts) == 4 and all(HEAD in t and t.count("Task: ") == 2 for t in texts)
    inherited(tmp_path / "dpo")

    rollouts = []
    real_collect = grpo.collect_rollouts

    def spy_collect(*args, **kwargs):
        trajs = real_collect(*args, **kwargs)
        rollouts.extend(trajs)
        return trajs

    monkeypatch.setattr(grpo, "collect_rollouts", spy_collect)
    train = [t for t in sql_tasks if t.split == "train"][:2]
    train_grpo(train, tiny_model, tmp_path / "grpo", GRPOConfig(r=4, steps=1, batch_size=1, group_size=2, max_turns=1,
               max_new_tokens=4, seed=0), init_adapter=str(base), progress=False)
    assert rollouts and all(t.messages[1].content.startswith(HEAD) for t in rollouts)
    inherited(tmp_path / "grpo")


def test_a_negative_number_of_demos_is_refused(expert_trajs, tmp_path):
    from trajforge.train.demos import sft_demos

    with pytest.raises(ValueError, match="--demos must be 0 or more, not -2"):
        sft_demos(expert_trajs[:5], -2, None, tmp_path)
