"""Shared training math: hidden states with a shared-prefix KV cache, masked next-token loss.

Why shared prefixes: in agent data every sample of a toolset starts with the same system prompt
(the tool block alone is ~400 tokens for four SQL tools), often more than half of each sequence.
``decoder_hidden`` runs that common prefix once per batch, expands its KV cache across the batch
and runs only the suffixes against it. The forward pass is the same computation, and gradients
flow through the cached keys/values into the adapter weights of the prefix, so loss and gradient
match the plain path (a test checks both) at a fraction of the cost.
"""

from __future__ import annotations

import inspect

IGNORE = -100
MIN_SHARED_PREFIX = 32
"""Below this many common tokens the plain path is cheaper than the cache bookkeeping."""


def _backbone(model):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.model, base.lm_head


def common_prefix_len(input_ids, attention_mask, labels) -> int:
    """Tokens every row shares from the start, unpadded and carrying no loss."""
    same = (input_ids == input_ids[:1]).all(0) & attention_mask.bool().all(0)
    same &= (labels == IGNORE).all(0)
    return int(same.long().cumprod(0).sum())


def decoder_hidden(model, input_ids, attention_mask, labels, share_prefix: bool = True):
    """Last hidden states [B, T, H] of the decoder, using a shared-prefix cache when it pays."""
    import torch

    decoder, _ = _backbone(model)
    batch, width = input_ids.shape
    prefix = common_prefix_len(input_ids, attention_mask, labels) if share_prefix and batch > 1 else 0
    prefix = min(prefix, width - 1)
    if prefix < MIN_SHARED_PREFIX:
        return decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    head = decoder(input_ids=input_ids[:1, :prefix], use_cache=True)
    cache = getattr(head, "cache", None) or head.past_key_values
    cache.batch_repeat_interleave(batch)
    positions = torch.arange(prefix, width, device=input_ids.device).unsqueeze(0).expand(batch, -1)
    cache_kw = "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"
    tail = decoder(input_ids=input_ids[:, prefix:], attention_mask=attention_mask, position_ids=positions,
                   use_cache=True, **{cache_kw: cache}).last_hidden_state
    return torch.cat([head.last_hidden_state.expand(batch, -1, -1), tail], dim=1)


def masked_lm_loss(model, input_ids, attention_mask, labels, share_prefix: bool = True):
    """Mean next-token cross-entropy over positions whose label is not IGNORE.

    The LM head runs only on loss positions: tool results and prompts are most tokens in agent
    data and the 49k-way head is a large share of a small model's compute.
    """
    import torch.nn.functional as F

    _, lm_head = _backbone(model)
    hidden = decoder_hidden(model, input_ids, attention_mask, labels, share_prefix)
    target = labels[:, 1:]
    keep = target != IGNORE
    logits = lm_head(hidden[:, :-1][keep]).float()
    return F.cross_entropy(logits, target[keep])
