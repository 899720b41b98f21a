"""Exact accumulation: k micro-batches of one step equal one batch k times larger.

Each micro-batch's loss is a sum over its loss tokens divided by the token count of the whole
step, so the accumulated gradient is the gradient of the step's token mean — whatever the
micro-batches' lengths. (Averaging per-micro-batch means would weight a short micro-batch's
tokens more; the unequal lengths below make that difference visible, so the test can fail.)
"""

import pytest
import torch

from trajforge.train.loop import Runtime, accumulate_step, objective
from trajforge.train.losses import lm_loss_sum
from trajforge.train.model import lora_model
from trajforge.train.sequences import Sample, collate, loss_tokens
from trajforge.train.settings import LoraSettings


def _samples(n: int = 8) -> list[Sample]:
    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        length = 12 + 7 * i  # unequal lengths and loss-token counts
        ids = torch.randint(5, 300, (length,), generator=g).tolist()
        mask = [0] * (length // 2) + [1] * (length - length // 2)
        out.append(Sample(ids, mask))
    return out


def _micro(rows: list[Sample], pad: int) -> dict:
    return {**collate(rows, pad, device="cpu"), "counts": {"tokens": float(sum(loss_tokens(s) for s in rows))}}


def _loss(model, m, totals):
    return model(lm_loss_sum, m["input_ids"], m["attention_mask"], m["labels"], False) / totals["tokens"], {}


def _grads(tiny_model, micro_sizes: list[int]):
    cfg = LoraSettings(r=4, dropout=0.0, seed=0, dtype="float32")
    runtime = Runtime(cfg)
    net, tok = lora_model(tiny_model, cfg, device="cpu")
    with torch.no_grad():  # non-zero B, so every adapter weight gets a gradient
        for name, p in net.named_parameters():
            if p.requires_grad:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(hash(name) % 2**31))
    model = runtime.acc.prepare(objective(net))
    rows, micro, at = _samples(), [], 0
    for size in micro_sizes:
        micro.append(_micro(rows[at: at + size], tok.pad_token_id))
        at += size
    net.train()
    loss, _ = accumulate_step(runtime, model, micro, _loss)
    return loss, {n: p.grad.clone() for n, p in net.named_parameters() if p.requires_grad}


def test_k_micro_batches_equal_one_batch_k_times_larger(tiny_model):
    one_loss, one = _grads(tiny_model, [8])
    for sizes in ([2, 2, 2, 2], [1, 3, 4]):
        loss, accumulated = _grads(tiny_model, sizes)
        assert loss == pytest.approx(one_loss, rel=1e-6)
        assert accumulated.keys() == one.keys()
        for name in one:
            torch.testing.assert_close(accumulated[name], one[name], rtol=1e-5, atol=1e-8)
    assert any(g.abs().max() > 1e-4 for g in one.values())
