"""Shared training math: hidden states with a shared-prefix KV cache, chunked LM head, masked losses.

Why a chunked LM head: logits are tokens × vocabulary × 4 bytes in fp32. Only loss positions go
through the head (prompts and tool results are most tokens in agent data), and those go in chunks
of at most ``LOGIT_CHUNK_BYTES`` of logits; when there is more than one chunk each is
recomputed in the backward pass instead of kept, so a 152k vocabulary at 4096 loss tokens needs
~0.6 GB of logits at a time instead of 2.5 GB (plus as much again for the softmax).

Why shared prefixes: in agent data every sample of a toolset starts with the same system prompt
(the tool block alone is ~400 tokens for four SQL tools), often more than half of each sequence.
``decoder_hidden`` runs that common prefix once per batch, expands its KV cache across the batch
and runs only the suffixes against it. The forward pass is the same computation, and gradients
flow through the cached keys/values into the adapter weights of the prefix, so loss and gradient
match the plain path (a test checks both) at a fraction of the cost.
"""

from __future__ import annotations

import inspect

from trajforge.train.sequences import IGNORE

MIN_SHARED_PREFIX = 32
"""Below this many common tokens the plain path is cheaper than the cache bookkeeping."""
LOGIT_CHUNK_BYTES = 2 ** 28
"""fp32 logits per LM-head chunk (256 MB): 1365 tokens at SmolLM2's 49k vocabulary, 441 at 152k."""


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
        return decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    head = decoder(input_ids=input_ids[:1, :prefix], use_cache=True)
    cache = getattr(head, "cache", None) or head.past_key_values
    if cache is None:  # the model refused a cache (gradient checkpointing in train mode): plain path
        return decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    cache.batch_repeat_interleave(batch)
    positions = torch.arange(prefix, width, device=input_ids.device).unsqueeze(0).expand(batch, -1)
    cache_kw = "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"
    tail = decoder(input_ids=input_ids[:, prefix:], attention_mask=attention_mask, position_ids=positions,
                   use_cache=True, **{cache_kw: cache}).last_hidden_state
    return torch.cat([head.last_hidden_state.expand(batch, -1, -1), tail], dim=1)


def chunk_tokens(vocab: int) -> int:
    """Loss positions per LM-head chunk for a vocabulary of ``vocab`` entries."""
    return max(64, LOGIT_CHUNK_BYTES // (4 * vocab))


def _picked_logprobs(lm_head, hidden, target):
    import torch

    logits = lm_head(hidden).float()
    return torch.log_softmax(logits, -1).gather(-1, target.unsqueeze(-1)).squeeze(-1)


def chunked_logprobs(lm_head, hidden, target):
    """log p(target) for rows of ``hidden`` [N, H], through the head in bounded chunks; a chunk is
    recomputed in the backward pass when there are several (see the module docstring)."""
    import torch
    from torch.utils.checkpoint import checkpoint

    step = chunk_tokens(lm_head.weight.shape[0])
    if hidden.shape[0] <= step:
        return _picked_logprobs(lm_head, hidden, target)
    parts = [checkpoint(_picked_logprobs, lm_head, hidden[i: i + step], target[i: i + step], use_reentrant=False)
             if torch.is_grad_enabled() else _picked_logprobs(lm_head, hidden[i: i + step], target[i: i + step])
             for i in range(0, hidden.shape[0], step)]
    return torch.cat(parts)


def _loss_position_logprobs(model, input_ids, attention_mask, labels, share_prefix: bool):
    """(log-probs of the label tokens at loss positions [N], keep mask [B, T-1])."""
    _, lm_head = _backbone(model)
    hidden = decoder_hidden(model, input_ids, attention_mask, labels, share_prefix)
    target = labels[:, 1:]
    keep = target != IGNORE
    return chunked_logprobs(lm_head, hidden[:, :-1][keep], target[keep]), keep


def lm_loss_sum(model, input_ids, attention_mask, labels, share_prefix: bool = True):
    """Summed next-token cross-entropy over loss positions (callers divide by the token count of
    the whole optimizer step, so micro-batches and processes add up to the exact batch mean)."""
    picked, _ = _loss_position_logprobs(model, input_ids, attention_mask, labels, share_prefix)
    return -picked.sum()


def masked_lm_loss(model, input_ids, attention_mask, labels, share_prefix: bool = True):
    """Mean next-token cross-entropy over positions whose label is not IGNORE.

    The LM head runs only on loss positions: tool results and prompts are most tokens in agent
    data and the 49k-way head is a large share of a small model's compute.
    """
    picked, keep = _loss_position_logprobs(model, input_ids, attention_mask, labels, share_prefix)
    return -picked.sum() / keep.sum().clamp(min=1)


# ---- preference and policy-gradient math (DPO, GRPO) -------------------------------------------


def token_logprobs(model, input_ids, attention_mask, labels, share_prefix: bool = True):
    """Log-probability of each label token, shape [B, T-1]; exactly 0 where the label is IGNORE.

    Position t holds log p(labels[t+1] | tokens ≤ t). Only loss positions go through the LM head,
    as in ``masked_lm_loss``, so prompts and tool results cost nothing there and cannot carry
    gradient.
    """
    import torch

    picked, keep = _loss_position_logprobs(model, input_ids, attention_mask, labels, share_prefix)
    out = torch.zeros(keep.shape, dtype=picked.dtype, device=picked.device)
    out[keep] = picked
    return out


def sequence_logprobs(model, input_ids, attention_mask, labels, share_prefix: bool = True):
    """Sum of the label tokens' log-probabilities per row, shape [B]."""
    return token_logprobs(model, input_ids, attention_mask, labels, share_prefix).sum(-1)


def dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta: float = 0.1, reduction: str = "mean"):
    """Direct Preference Optimization (Rafailov et al. 2023), sigmoid form, mean over pairs
    (``reduction="none"``: one loss per pair, for callers that sum over micro-batches).

    Arguments are summed sequence log-probs [P] under the policy and the frozen reference.
    Returns (loss, margin) where margin = beta * (policy log-ratio − reference log-ratio): the
    implicit reward difference, > 0 when the policy prefers the chosen answer more than the
    reference did.
    """
    import torch.nn.functional as F

    margin = beta * ((chosen - ref_chosen) - (rejected - ref_rejected))
    per_pair = -F.logsigmoid(margin)
    return (per_pair if reduction == "none" else per_pair.mean()), margin.detach()


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
        if (r == r[0]).all():
            # Left at exactly 0: the float mean of equal rewards can miss them by an ulp (eight
            # 0.7s in fp32), and / (std + eps) made that a shared advantage of ~0.06.
            continue
        centred = r - r.mean()
        adv[sel] = centred / (r.std(unbiased=False) + eps) if scale else centred
    return adv


def policy_gradient_loss(logp, old_logp, advantages, mask, clip: float = 0.2, ref_logp=None,
                         kl_beta: float = 0.0, behaviour_logp=None, tis_cap: float = 0.0, denom=None,
                         weights=None):
    """Clipped policy-gradient loss with an optional KL penalty, averaged over loss tokens.

    ``logp``/``old_logp``/``ref_logp``/``mask`` are [B, T] token tensors; ``advantages`` is [B]
    (one per sequence: every token of a rollout shares its episode's advantage). With a single
    update per rollout batch ``old_logp = logp.detach()`` and the ratio is exactly 1, so the loss's
    gradient is the plain REINFORCE-with-baseline gradient. The KL term is the k3 estimator
    exp(ref − logp) − (ref − logp) − 1 (non-negative, unbiased), as in GRPO. Averaging over all loss
    tokens of the batch (not per sequence first) keeps long and short turns weighted per token;
    ``denom`` is that token count when the batch is split over micro-batches and processes (the
    default: this call's own loss tokens). ``weights`` ([B], default 1) scales every token of a
    sequence, e.g. 1 / its rollout's loss tokens with ``denom`` = the rollouts: a mean per
    rollout, then over rollouts (GRPO's original normalisation).

    Truncated importance sampling (``tis_cap`` > 0, with ``behaviour_logp`` the log-probs the
    rollout server reported for the sampled tokens): a server samples with other kernels and
    precision than the trainer scores with, so its rollouts are slightly off-policy. Each token's
    term is weighted by min(π_trainer / π_server, cap), detached — the correction of Yao et al.
    (2025) "Your efficient RL framework secretly brings you off-policy RL training".
    Returns (loss, stats) with stats as detached tensors.
    """
    import torch

    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(-1)
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)
    per_token = -surrogate
    if weights is not None:
        mask = mask * weights.to(mask.dtype).unsqueeze(-1)
    n = mask.sum().clamp(min=1) if denom is None else denom
    stats = {}
    if behaviour_logp is not None and tis_cap > 0:
        weight = torch.exp(old_logp - behaviour_logp).clamp(max=tis_cap).detach()
        per_token = per_token * weight
        stats["tis_weight"] = (weight * mask).sum().detach() / mask.sum().clamp(min=1)
    kl = torch.zeros_like(logp)
    if ref_logp is not None and kl_beta > 0:
        delta = ref_logp - logp
        kl = torch.exp(delta) - delta - 1
        per_token = per_token + kl_beta * kl
    loss = (per_token * mask).sum() / n
    stats["kl"] = (kl * mask).sum().detach() / n
    stats["clipped"] = (((ratio - 1).abs() > clip).to(mask.dtype) * mask).sum().detach() / n
    return loss, stats
