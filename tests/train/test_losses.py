"""Shared training math, with hand-checkable cases."""

import math

import pytest
import torch

from tests.tiny import build_tiny_model
from trajforge.train.losses import IGNORE, common_prefix_len, masked_lm_loss


@pytest.fixture(scope="module")
def lora_model(tmp_path_factory):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    path = build_tiny_model(tmp_path_factory.mktemp("tiny"))
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(path),
                           LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"],
                                      task_type="CAUSAL_LM"))
    for name, p in model.named_parameters():  # non-zero B so every LoRA weight gets gradient
        if "lora_B" in name:
            p.data.normal_(0, 0.1)
    return model


def batch(prefix=40, suffix=12, rows=3, vocab=300, seed=0, pad=True):
    g = torch.Generator().manual_seed(seed)
    head = torch.randint(5, vocab, (1, prefix), generator=g).expand(rows, -1)
    ids = torch.cat([head, torch.randint(5, vocab, (rows, suffix), generator=g)], 1)
    att = torch.ones_like(ids)
    if pad:
        att[0, -3:] = 0  # right padding
    labels = ids.clone()
    labels[:, : prefix + 2] = IGNORE
    labels[att == 0] = IGNORE
    return ids, att, labels


def grads(model):
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.requires_grad])


def test_common_prefix_len():
    ids, att, labels = batch(prefix=40)
    assert common_prefix_len(ids, att, labels) == 40
    labels[1, 5] = 7  # a loss position ends the shareable prefix
    assert common_prefix_len(ids, att, labels) == 5


def test_shared_prefix_matches_plain_loss_and_gradient(lora_model):
    ids, att, labels = batch()
    results = []
    for share in (False, True):
        lora_model.zero_grad()
        loss = masked_lm_loss(lora_model, ids, att, labels, share_prefix=share)
        loss.backward()
        results.append((loss.item(), grads(lora_model).clone()))
    (l0, g0), (l1, g1) = results
    assert l1 == pytest.approx(l0, rel=1e-5)
    assert torch.allclose(g0, g1, rtol=1e-4, atol=1e-6)


def test_masked_loss_is_plain_cross_entropy_on_kept_positions(lora_model):
    ids, att, labels = batch(prefix=4, suffix=6, rows=1, pad=False)
    with torch.no_grad():
        logits = lora_model(input_ids=ids, attention_mask=att).logits[0]
        expected = [-torch.log_softmax(logits[t - 1], -1)[labels[0, t]].item()
                    for t in range(1, ids.shape[1]) if labels[0, t] != IGNORE]
        got = masked_lm_loss(lora_model, ids, att, labels).item()
    assert got == pytest.approx(sum(expected) / len(expected), rel=1e-5)
    assert len(expected) == 6 - 2 and not math.isnan(got)


def test_masked_tokens_contribute_zero_gradient(lora_model):
    """Changing a token that only appears as a (masked) target leaves the gradient unchanged."""
    ids, att, labels = batch(prefix=20, suffix=10, rows=1, pad=False)
    lora_model.zero_grad()
    masked_lm_loss(lora_model, ids, att, labels).backward()
    before = grads(lora_model).clone()
    # The last token is a target only; mask it and change it: gradient must be the same as
    # masking it with its original value.
    labels2 = labels.clone()
    labels2[0, -1] = IGNORE
    lora_model.zero_grad()
    masked_lm_loss(lora_model, ids, att, labels2).backward()
    masked = grads(lora_model).clone()
    ids3 = ids.clone()
    ids3[0, -1] = (ids[0, -1] + 1) % 300
    lora_model.zero_grad()
    masked_lm_loss(lora_model, ids3, att, labels2).backward()
    assert torch.equal(masked, grads(lora_model))
    assert not torch.equal(before, masked)
