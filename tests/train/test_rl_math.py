"""DPO and GRPO math, checked against numbers worked out by hand."""

import math

import pytest
import torch

from tests.train.test_losses import batch, lora_model  # noqa: F401 - shared fixture
from trajforge.train.losses import (IGNORE, dpo_loss, group_advantages, masked_lm_loss,
                                    policy_gradient_loss, sequence_logprobs, token_logprobs)


def test_dpo_loss_by_hand():
    # policy log-ratio: chosen -1 vs ref -2 → +1; rejected -3 vs ref -2 → -1; margin 0.5*(1-(-1)) = 1
    loss, margin = dpo_loss(torch.tensor([-1.0]), torch.tensor([-3.0]), torch.tensor([-2.0]),
                            torch.tensor([-2.0]), beta=0.5)
    assert margin.item() == pytest.approx(1.0)
    assert loss.item() == pytest.approx(math.log(1 + math.exp(-1)), abs=1e-6)  # 0.313262
    # equal ratios: the loss is log 2 and the margin 0
    loss, margin = dpo_loss(*(torch.tensor([-2.0]),) * 4)
    assert loss.item() == pytest.approx(math.log(2)) and margin.item() == 0


def test_group_advantages_by_hand():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.2])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 2])
    adv = group_advantages(rewards, groups, eps=0.0 + 1e-12)
    # group 0: mean 0.5, population std 0.5 → ±1; group 1 all equal → 0; singleton → 0
    assert adv.tolist() == pytest.approx([1, -1, -1, 1, 0, 0, 0], abs=1e-6)
    unscaled = group_advantages(rewards, groups, scale=False)
    assert unscaled.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5, 0, 0, 0])


@pytest.mark.parametrize("value", [0.7, 0.1, 0.93])
def test_a_group_of_equal_rewards_gets_exactly_zero(value):
    # fp32's mean of eight 0.7s is one ulp off 0.7; divided by (std + eps) that was a shared 0.056,
    # so GRPO kept the group (advantage != 0) and pushed all its rollouts the same way.
    rewards = torch.tensor([value] * 8 + [1.0, 0.0])
    groups = torch.tensor([0] * 8 + [1, 1])
    for scale in (True, False):
        adv = group_advantages(rewards, groups, scale=scale)
        assert adv[:8].tolist() == [0.0] * 8 and adv[8].item() > 0 > adv[9].item()


def test_policy_gradient_loss_by_hand():
    logp = torch.tensor([[-1.0, -2.0, -5.0], [-0.5, -9.0, -9.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    adv = torch.tensor([2.0, -1.0])
    loss, stats = policy_gradient_loss(logp, logp.detach(), adv, mask)
    assert loss.item() == pytest.approx((-2 - 2 + 1) / 3)  # ratio 1: -mean(adv over loss tokens)
    loss.backward()
    assert logp.grad.flatten().tolist() == pytest.approx([-2 / 3, -2 / 3, 0, 1 / 3, 0, 0])
    assert stats["kl"] == 0


def test_policy_gradient_clipping_by_hand():
    old = torch.zeros(1, 1)
    logp = torch.full((1, 1), math.log(1.5), requires_grad=True)  # ratio 1.5, clip at 1.2
    loss, stats = policy_gradient_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 1))
    assert loss.item() == pytest.approx(-1.2) and stats["clipped"] == 1.0
    loss.backward()
    assert logp.grad.item() == 0  # clipped positive advantage: no push further up
    logp.grad = None
    loss, _ = policy_gradient_loss(logp, old, torch.tensor([-1.0]), torch.ones(1, 1))
    assert loss.item() == pytest.approx(1.5)  # negative advantage is never clipped from below
    loss.backward()
    assert logp.grad.item() == pytest.approx(1.5)


def test_kl_penalty_k3_by_hand():
    logp = torch.tensor([[-1.0]])
    ref = torch.tensor([[-2.0]])  # delta = -1: exp(-1) + 1 - 1 = 0.367879
    loss, stats = policy_gradient_loss(logp, logp, torch.tensor([0.0]), torch.ones(1, 1),
                                       ref_logp=ref, kl_beta=0.5)
    assert stats["kl"] == pytest.approx(math.exp(-1), abs=1e-6)
    assert loss.item() == pytest.approx(0.5 * math.exp(-1), abs=1e-6)


def test_token_logprobs_agree_with_the_lm_loss_and_vanish_off_mask(lora_model):  # noqa: F811
    ids, att, labels = batch()
    lp = token_logprobs(lora_model, ids, att, labels, share_prefix=False)
    keep = labels[:, 1:] != IGNORE
    assert (lp[~keep] == 0).all() and (lp[keep] < 0).all()
    ce = masked_lm_loss(lora_model, ids, att, labels, share_prefix=False)
    assert (-lp.sum() / keep.sum()).item() == pytest.approx(ce.item(), rel=1e-5)
    shared = sequence_logprobs(lora_model, ids, att, labels, share_prefix=True)
    assert shared.tolist() == pytest.approx(lp.sum(-1).tolist(), rel=1e-4)
