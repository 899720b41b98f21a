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


# ---- preference and policy-gradient math (DPO, GRPO) -------------------------------------------


def token_logprobs(model, input_ids, attention_mask, labels, share_prefix: bool = True):
    """Log-probability of each label token, shape [B, T-1]; exactly 0 where the label is IGNORE.

    Position t holds log p(labels[t+1] | tokens ≤ t). Only loss positions go through the LM head,
    as in ``masked_lm_loss``, so prompts and tool results cost nothing there and cannot carry
    gradient.
    """
    import torch

    _, lm_head = _backbone(model)
    hidden = decoder_hidden(model, input_ids, attention_mask, labels, share_prefix)
    target = labels[:, 1:]
    keep = target != IGNORE
    logits = lm_head(hidden[:, :-1][keep]).float()
    picked = torch.log_softmax(logits, -1).gather(-1, target[keep].unsqueeze(-1)).squeeze(-1)
    out = torch.zeros(target.shape, dtype=picked.dtype, device=picked.device)
    out[keep] = picked
    return out


def sequence_logprobs(model, input_ids, attention_mask, labels, share_prefix: bool = True):
    """Sum of the label tokens' log-probabilities per row, shape [B]."""
    return token_logprobs(model, input_ids, attention_mask, labels, share_prefix).sum(-1)


def dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta: float = 0.1):
    """Direct Preference Optimization (Rafailov et al. 2023), sigmoid form, mean over pairs.

    Arguments are summed sequence log-probs [P] under the policy and the frozen reference.
    Returns (loss, margin) where margin = beta * (policy log-ratio − reference log-ratio): the
    implicit reward difference, > 0 when the policy prefers the chosen answer more than the
    reference did.
    """
    import torch.nn.functional as F

    margin = beta * ((chosen - ref_chosen) - (rejected - ref_rejected))
    return -F.logsigmoid(margin).mean(), margin.detach()


def group_advantages(rewards, groups, scale: bool = True, eps: float = 1e-6):
    """GRPO's group-relative advantage: (r − mean of its group) / (std of its group + eps).

    ``rewards`` [N] float, ``groups`` [N] int (same id = rollouts of the same task). A group whose
    rewards are all equal gets advantage 0 everywhere: it carries no learning signal. The std is
    the population std (the group is the whole population), as in DeepSeekMath's GRPO;
    ``scale=False`` gives Dr. GRPO's unscaled variant.
    """
    import torch

    adv = torch.zeros_like(rewards)
    for g in groups.unique():
        sel = groups == g
        r = rewards[sel]
        centred = r - r.mean()
        adv[sel] = centred / (r.std(unbiased=False) + eps) if scale else centred
    return adv


def policy_gradient_loss(logp, old_logp, advantages, mask, clip: float = 0.2, ref_logp=None,
                         kl_beta: float = 0.0):
    """Clipped policy-gradient loss with an optional KL penalty, averaged over loss tokens.

    ``logp``/``old_logp``/``ref_logp``/``mask`` are [B, T] token tensors; ``advantages`` is [B]
    (one per sequence: every token of a rollout shares its episode's advantage). With a single
    update per rollout batch ``old_logp = logp.detach()`` and the ratio is exactly 1, so the loss's
    gradient is the plain REINFORCE-with-baseline gradient. The KL term is the k3 estimator
    exp(ref − logp) − (ref − logp) − 1 (non-negative, unbiased), as in GRPO. Averaging over all loss
    tokens of the batch (not per sequence first) keeps long and short turns weighted per token.
    Returns (loss, stats).
    """
    import torch

    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(-1)
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)
    per_token = -surrogate
    kl = torch.zeros_like(logp)
    if ref_logp is not None and kl_beta > 0:
        delta = ref_logp - logp
        kl = torch.exp(delta) - delta - 1
        per_token = per_token + kl_beta * kl
    n = mask.sum().clamp(min=1)
    loss = (per_token * mask).sum() / n
    stats = {"kl": float((kl * mask).sum() / n),
             "clipped": float((((ratio - 1).abs() > clip).to(mask.dtype) * mask).sum() / n)}
    return loss, stats
