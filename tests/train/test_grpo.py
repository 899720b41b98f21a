"""GRPO on a tiny model: group advantages from graded rollouts, exact token ids, masks, golden
losses, and the whole loop with real sampling, curriculum and guided exploration."""

import json

import pytest
import torch

from tests.train.rollouts import TokenScripted
from trajforge.grade import graded
from trajforge.harness import run_episodes
from trajforge.train.grpo import GRPOConfig, grpo_loss, rollout_batch, to_rollouts, train_grpo
from trajforge.train.losses import IGNORE
from trajforge.train.trainer import fit, lora_model


@pytest.fixture(scope="module")
def rollouts(tiny_model, sql_tasks):
    from trajforge.policies.hf import load_model

    net, tok = load_model(tiny_model)
    train = [t for t in sql_tasks if t.split == "train"][:4]
    return [graded(t) for t in run_episodes(train, TokenScripted(tiny_model, net, tok), samples=2)]


def test_group_relative_advantages_and_exact_tokens(rollouts):
    r = to_rollouts(rollouts)
    # each task: one success, one wrong answer → advantages +1 / -1, every group informative
    assert r.stats["groups"] == r.stats["informative_groups"] == 4
    assert sorted(r.advantages) == pytest.approx([-1] * 4 + [1] * 4, abs=1e-5)
    steps = [s for t in rollouts for s in t.steps]
    assert len(r.sequences) == len(steps)
    for (seq, n_prompt, _), s in zip(r.sequences, steps):  # the stored ids, verbatim
        assert seq == s.prompt_ids + s.completion_ids and n_prompt == len(s.prompt_ids)


def test_groups_that_agree_carry_no_signal(rollouts):
    solved = [t for t in rollouts if t.outcome.correct]
    assert to_rollouts(solved).sequences == []


def test_prompt_and_tool_result_tokens_never_reach_the_loss(rollouts, tiny_model):
    net, tok = lora_model(tiny_model, GRPOConfig(r=4, alpha=8))
    r = to_rollouts(rollouts)
    ids, att, labels = rollout_batch(r.sequences, tok.pad_token_id)
    for row, (seq, n_prompt, _) in zip(labels.tolist(), r.sequences):
        assert row[:n_prompt] == [IGNORE] * n_prompt  # prompt incl. every tool result
        assert row[n_prompt:len(seq)] == seq[n_prompt:]
    assert any("<tool_response>" in tok.decode(seq[:n]) for seq, n, _ in r.sequences)
    rows = []
    hook = net.get_base_model().lm_head.register_forward_hook(lambda m, i, o: rows.append(i[0].shape[0]))
    grpo_loss(net, r, tok.pad_token_id, GRPOConfig(micro_batch=64), backward=False)
    hook.remove()
    assert sum(rows) == sum(len(seq) - n for seq, n, _ in r.sequences)  # completion tokens only


GOLDEN = [-0.010252904146909714, -0.010086562484502792, -0.009268391877412796]


def test_grpo_updates_parameters_with_golden_losses(rollouts, tiny_model, tmp_path):
    cfg = GRPOConfig(r=4, alpha=8, dropout=0.0, lr=5e-2, micro_batch=4, kl_beta=0.1, seed=0)
    net, tok = lora_model(tiny_model, cfg)
    before = {n: p.detach().clone() for n, p in net.named_parameters() if p.requires_grad}
    r = to_rollouts(rollouts)
    res = fit(net, 3, lambda step: r, lambda b: grpo_loss(net, b, tok.pad_token_id, cfg), cfg, tmp_path,
              progress=False)
    assert res.losses == pytest.approx(GOLDEN, rel=1e-4)
    changed = [n for n, p in net.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert len(changed) == len(before)


def test_train_grpo_end_to_end_with_sampling(tiny_model, sql_tasks, tmp_path):
    train = [t for t in sql_tasks if t.split == "train"]
    cfg = GRPOConfig(r=4, alpha=8, steps=2, batch_size=2, group_size=3, max_turns=2, max_new_tokens=16,
                     guided=True, seed=1)
    res = train_grpo(train, tiny_model, tmp_path / "grpo", cfg, progress=False)
    assert res.steps == 2 and len(res.rewards) == 2
    assert res.rescue["episodes"] == 12 and res.rescue["rescued"] > 0  # random model: always failing
    rows = [json.loads(x) for x in (tmp_path / "grpo" / "curves.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all("reward" in r and "groups" in r for r in rows)
    meta = json.loads((tmp_path / "grpo" / "trajforge_adapter.json").read_text())
    assert meta["recipe"] == "grpo" and meta["toolset_fingerprint"]
